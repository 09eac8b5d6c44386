"""GPU tests: the tensor-core decode attention kernel (kernels/attention/decode_mma.cu) against the torch decode path
in f32 (the helpers of test_paged_decode_cuda), fresh random inputs, output NaN-poisoned and the pool slots past each
row's keys NaN too (a read of a key outside the row would show): head dims 64, 128 and 256, GQA groups 1 to 8, key
counts around the 16-key chunk, the 16-token block and the warps' chunk rounds, one split and many (empty splits
included), each ring shape the bench times, the auto dispatch and CUDA-graph replays."""
import pytest
import torch

from kernels.attention import ops
from tests.kernels.test_paged_decode_cuda import BLOCK, _case, _reference, _rel, _run

pytestmark = pytest.mark.gpu
KEYS = [1, 15, 16, 17, 63, 64, 65, 300, 1000, 2500]


def _poison_tails(k_pool, v_pool, tables, num_keys):
    """NaN into every pool position past a row's last key in its last block (never part of any row)."""
    for r, n in enumerate(num_keys):
        last = int(tables[r, (n - 1) // BLOCK])
        k_pool[last, (n - 1) % BLOCK + 1:] = float("nan")
        v_pool[last, (n - 1) % BLOCK + 1:] = float("nan")


@pytest.mark.parametrize("heads", [(24, 4, 256), (16, 2, 128), (8, 8, 128), (32, 4, 128), (12, 4, 256), (4, 2, 64)],
                         ids=["24q4kv-256", "16q2kv-128", "8q8kv-128", "32q4kv-128", "12q4kv-256", "4q2kv-64"])
def test_mma_kernel_matches_torch_decode(heads):
    num_heads, num_kv, head_dim = heads
    q, k_pool, v_pool, tables = _case(KEYS, num_heads, num_kv, head_dim, seed=sum(heads) + 11)
    _poison_tails(k_pool, v_pool, tables, KEYS)
    ref = _reference(q, k_pool, v_pool, tables, KEYS, head_dim ** -0.5)
    assert not torch.isnan(ref).any()
    for max_keys in (max(KEYS), 1 << 15):  # S from the longest row, and more splits than most rows fill
        for config in ((4, 3), (2, 4), (4, 2)):
            got = _run(q, k_pool, v_pool, tables, KEYS, max_keys, kernel="mma", mma_config=config)
            assert _rel(got, ref) < 1e-2, (heads, max_keys, config)
            for r in range(len(KEYS)):  # a short row's error must not hide in the long rows' norm
                assert _rel(got[r], ref[r]) < 2e-2, (heads, max_keys, config, KEYS[r])


def test_decode_rows_dispatch_to_the_mma_kernel_and_stay_correct_in_a_graph(monkeypatch):
    for rows, keys in ((1, 100), (1, 1 << 15), (7, 600), (64, 4096)):
        assert ops.pick_kernel(rows, 256) == "mma" and ops.preferred(rows, 256, keys)
    monkeypatch.setattr(ops, "MMA_ENABLED", False)  # SPARKINFER_DECODE_MMA=0: the kernels before it
    assert ops.pick_kernel(1, 256) == "tile" and not ops.preferred(1, 256, 4096)
    assert ops.pick_kernel(8, 256) == "split" and ops.preferred(8, 256, 4096)
    monkeypatch.undo()
    num_keys = [3000, 1, 1800]
    q, k_pool, v_pool, tables = _case(num_keys, 24, 4, 256, seed=21)
    keys = torch.tensor(num_keys, dtype=torch.int32, device="cuda")
    out = torch.empty_like(q)
    ops.paged_decode(q, k_pool, v_pool, tables, keys, 256 ** -0.5, 4096, out=out)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.paged_decode(q, k_pool, v_pool, tables, keys, 256 ** -0.5, 4096, out=out)
    for seed in (1, 2):
        q.copy_(torch.randn(q.shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = _reference(q, k_pool, v_pool, tables, num_keys, 256 ** -0.5)
        for r in range(len(num_keys)):
            assert _rel(out[r], ref[r]) < 2e-2, num_keys[r]
