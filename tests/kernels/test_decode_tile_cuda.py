"""GPU tests: the few-row decode attention kernel (kernels/attention/decode_tile.cu) against the torch decode path in
f32 (the helpers of test_paged_decode_cuda), fresh random inputs, output NaN-poisoned: 1 to 7 rows, key counts around
the 32-key tile and the 16-token block edges, head dims 128 and 256, GQA groups 1 to 8, one split and many (empty
splits included), and the auto dispatch (few rows -> this kernel)."""
import pytest
import torch

from kernels.attention import ops
from tests.kernels.test_paged_decode_cuda import _case, _reference, _rel

pytestmark = pytest.mark.gpu


def _run_tile(q, k_pool, v_pool, tables, num_keys, max_keys):
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16, device="cuda")
    keys = torch.tensor(num_keys, dtype=torch.int32, device="cuda")
    ops.paged_decode(q, k_pool, v_pool, tables, keys, q.shape[2] ** -0.5, max_keys, out=out, kernel="tile")
    torch.cuda.synchronize()
    return out


@pytest.mark.parametrize("heads", [(24, 4, 256), (16, 2, 128), (8, 8, 128), (32, 4, 128), (4, 4, 256)],
                         ids=["24q4kv-256", "16q2kv-128", "8q8kv-128", "32q4kv-128", "4q4kv-256"])
@pytest.mark.parametrize("num_keys", [[1], [31, 32, 33], [1, 15, 16, 17, 64, 300, 1000]], ids=["1", "3", "7"])
def test_tile_kernel_matches_torch_decode(heads, num_keys):
    num_heads, num_kv, head_dim = heads
    q, k_pool, v_pool, tables = _case(num_keys, num_heads, num_kv, head_dim, seed=sum(heads) + len(num_keys))
    ref = _reference(q, k_pool, v_pool, tables, num_keys, head_dim ** -0.5)
    for max_keys in (32, max(num_keys), 1 << 14):  # one split (when every row fits a tile), a few, many
        if max_keys < max(num_keys):
            continue
        got = _run_tile(q, k_pool, v_pool, tables, num_keys, max_keys)
        for r in range(len(num_keys)):
            assert _rel(got[r], ref[r]) < 2e-2, (heads, max_keys, num_keys[r])
        assert _rel(got, ref) < 1e-2


def test_few_rows_dispatch_to_the_tile_kernel_and_stay_correct_in_a_graph():
    assert ops.uses_tile_kernel(1, 256) and ops.uses_tile_kernel(ops.MIN_ROWS - 1, 128)
    assert not ops.uses_tile_kernel(ops.MIN_ROWS, 256) and not ops.uses_tile_kernel(1, 64)
    num_keys = [513, 2]
    q, k_pool, v_pool, tables = _case(num_keys, 24, 4, 256, seed=3)
    keys = torch.tensor(num_keys, dtype=torch.int32, device="cuda")
    out = torch.empty_like(q)
    ops.paged_decode(q, k_pool, v_pool, tables, keys, 256 ** -0.5, 1024, out=out, kernel="tile")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.paged_decode(q, k_pool, v_pool, tables, keys, 256 ** -0.5, 1024, out=out, kernel="tile")
    for seed in (1, 2):
        q.copy_(torch.randn(q.shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _rel(out, _reference(q, k_pool, v_pool, tables, num_keys, 256 ** -0.5)) < 1e-2


def test_tile_kernel_refuses_head_dim_64():
    q, k_pool, v_pool, tables = _case([5], 4, 2, 64, seed=1)
    with pytest.raises(ops.PagedDecodeError, match="few-row kernel"):
        ops.paged_decode(q, k_pool, v_pool, tables, torch.tensor([5], dtype=torch.int32, device="cuda"), 0.1, 16,
                         kernel="tile")
