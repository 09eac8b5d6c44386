"""GPU tests: the paged decode attention kernel (kernels/attention) against the torch decode path
(worker/layers/paged_attention.decode_attention) computed in f32, on fresh random inputs with the output
NaN-poisoned first: GQA groups 1..8, head dims 64, 128 and 256, block tables out of order, key counts around the
block and tile edges, split and unsplit."""
import pytest
import torch

from kernels.attention import ops
from worker.layers.paged_attention import decode_attention, decode_keys

pytestmark = pytest.mark.gpu
BLOCK = 16


def _case(num_keys: list, num_heads: int, num_kv: int, head_dim: int, seed: int):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    need = [-(-n // BLOCK) for n in num_keys]
    num_blocks = sum(need) + 7
    k_pool = torch.randn(num_blocks, BLOCK, num_kv, head_dim, device="cuda", generator=gen).bfloat16()
    v_pool = torch.randn(num_blocks, BLOCK, num_kv, head_dim, device="cuda", generator=gen).bfloat16()
    order = torch.randperm(num_blocks, device="cuda", generator=gen)
    width = max(need)
    tables = torch.full((len(num_keys), width), -1, dtype=torch.int64, device="cuda")
    at = 0
    for r, n in enumerate(need):
        tables[r, :n] = order[at:at + n]
        at += n
    q = (torch.randn(len(num_keys), num_heads, head_dim, device="cuda", generator=gen) * 2).bfloat16()
    return q, k_pool, v_pool, tables


def _reference(q, k_pool, v_pool, tables, num_keys, scale):
    key_index, key_valid = decode_keys(tables.clamp(min=0), list(range(len(num_keys))), [n - 1 for n in num_keys],
                                       BLOCK, q.device)
    num_kv, head_dim = k_pool.shape[2], k_pool.shape[3]
    flat_k, flat_v = (p.float().view(-1, num_kv, head_dim) for p in (k_pool, v_pool))
    return decode_attention(q.float(), flat_k, flat_v, key_index, key_valid, scale)


def _run(q, k_pool, v_pool, tables, num_keys, max_keys, keys_per_lane=0, kernel="split", mma_config=()):
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16, device="cuda")
    keys = torch.tensor(num_keys, dtype=torch.int32, device="cuda")
    ops.paged_decode(q, k_pool, v_pool, tables, keys, q.shape[2] ** -0.5, max_keys, out=out,
                     keys_per_lane=keys_per_lane, kernel=kernel, mma_config=mma_config)
    torch.cuda.synchronize()
    return out


def _rel(got, ref) -> float:
    assert not torch.isnan(got).any(), "unwritten outputs"
    return ((got.float() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("heads", [(24, 4, 256), (16, 2, 128), (8, 8, 128), (32, 4, 128), (12, 4, 256), (4, 2, 64)],
                         ids=["24q4kv-256", "16q2kv-128", "8q8kv-128", "32q4kv-128", "12q4kv-256", "4q2kv-64"])
def test_matches_torch_decode(heads):
    num_heads, num_kv, head_dim = heads
    num_keys = [1, 15, 16, 17, 33, 64, 300, 1000]
    q, k_pool, v_pool, tables = _case(num_keys, num_heads, num_kv, head_dim, seed=sum(heads))
    ref = _reference(q, k_pool, v_pool, tables, num_keys, head_dim ** -0.5)
    for max_keys in (max(num_keys), 1 << 15):  # S from the longest row, and more splits than most rows fill
        for kpl in (1, 2):
            got = _run(q, k_pool, v_pool, tables, num_keys, max_keys, kpl)
            assert _rel(got, ref) < 1e-2, (heads, max_keys, kpl)
            # row by row too: a short row's error must not hide in the long rows' norm
            for r in range(len(num_keys)):
                assert _rel(got[r], ref[r]) < 2e-2, (heads, max_keys, kpl, num_keys[r])


def test_one_row_long_context_splits():
    # C = 1 at 20K keys: 4 kv heads alone would use 4 SMs; the splits spread it, the combine merges them
    num_keys = [20000]
    q, k_pool, v_pool, tables = _case(num_keys, 24, 4, 256, seed=5)
    assert ops.num_splits(1, 4, 20000, 132) == ops.MAX_SPLITS
    err = _rel(_run(q, k_pool, v_pool, tables, num_keys, 20000), _reference(q, k_pool, v_pool, tables, num_keys,
                                                                             256 ** -0.5))
    assert err < 1e-2


def test_row_strided_query_and_graph_replay():
    # the attention layer hands q as a view of a wider projection output; a CUDA graph replays with new inputs
    num_keys = [40, 7, 260]
    q, k_pool, v_pool, tables = _case(num_keys, 24, 4, 256, seed=9)
    wide = torch.zeros(3, 24 * 256 + 64, dtype=torch.bfloat16, device="cuda")
    view = wide[:, :24 * 256].view(3, 24, 256)  # rows 6208 apart, heads contiguous
    view.copy_(q)
    keys = torch.tensor(num_keys, dtype=torch.int32, device="cuda")
    out = torch.empty(3, 24, 256, dtype=torch.bfloat16, device="cuda")
    ops.paged_decode(view, k_pool, v_pool, tables, keys, 256 ** -0.5, 512, out=out)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.paged_decode(view, k_pool, v_pool, tables, keys, 256 ** -0.5, 512, out=out)
    for seed in (1, 2):
        view.copy_(torch.randn(3, 24, 256, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = _reference(view.contiguous(), k_pool, v_pool, tables, num_keys, 256 ** -0.5)
        assert _rel(out, ref) < 1e-2


def test_rejects_what_it_cannot_run():
    q, k_pool, v_pool, tables = _case([5], 24, 4, 256, seed=1)
    keys = torch.tensor([5], dtype=torch.int32, device="cuda")
    with pytest.raises(ops.PagedDecodeError):
        ops.paged_decode(q.float(), k_pool, v_pool, tables, keys, 0.1, 16)
    with pytest.raises(ops.PagedDecodeError):
        ops.paged_decode(q, k_pool, v_pool, tables, keys.long(), 0.1, 16)
    with pytest.raises(ops.PagedDecodeError):  # 40 query heads on 4 kv heads: G = 10 > GMAX
        ops.paged_decode(torch.zeros(1, 40, 256, dtype=torch.bfloat16, device="cuda"), k_pool, v_pool, tables,
                         keys, 0.1, 16)
    with pytest.raises(ops.PagedDecodeError):  # heads not contiguous
        ops.paged_decode(torch.zeros(1, 24, 512, dtype=torch.bfloat16, device="cuda")[..., :256], k_pool, v_pool,
                         tables, keys, 0.1, 16)
