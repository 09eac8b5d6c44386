"""gemv_bulk.cu (v8: weight stream through a bulk-copy ring in shared memory) against dequantize-then-f32-matmul on
fresh random inputs and NaN-poisoned outputs: shapes whose blocks cover many / one / part of a row group, K off the
64 grid, every ring depth, x staged or read from global, and the split-K workspace left clean (needs a GPU)."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, gemv_bulk, naive, ops

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2


def _weight(n: int, k: int) -> checkpoint.NVFP4Weight:
    w = torch.randn(n, k, device="cuda") * (0.5 + torch.rand(n, 1, device="cuda"))
    return checkpoint.from_tensors(naive.quantize(w, "modelopt"))


def _run(p, ref_w, m, k, launch=None, **kw):
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    out = torch.full((m, p["N"]), float("nan"), dtype=torch.bfloat16, device="cuda")
    (launch or gemv_bulk.gemv_bulk)(x, p, out, **kw)
    torch.cuda.synchronize()
    ref = x.float() @ ref_w.t()
    assert not torch.isnan(out).any(), kw
    return ((out.float() - ref).norm() / ref.norm()).item()


# (200, 80): Kc = 2, a row group per 2 chunks (segments change inside a block's range; with 16 warps per CTA more
# virtual blocks than items: empty ranges); (1000, 1040): K % 64 = 16;
# 6144x5120 / 5120x17408: the 27B shapes (partial row groups at block edges, split-K flush)
@pytest.mark.parametrize("n,k", [(200, 80), (1000, 1040), (6144, 5120), (5120, 17408), (17408, 5120)],
                         ids=lambda v: str(v))
def test_bulk_gemv_matches(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (1, 2, 5, 8, 9, 13, 16, 1):  # the last M = 1 checks that M = 16 left the workspace clean
        assert _run(p, ref_w, m, k, xs=False) < REL_TOL, m
        assert _run(p, ref_w, m, k, xs=False, warps=16) < REL_TOL, (m, 16)
    if gemv_bulk.x_bytes(1, p) + 8 * 2304 <= 100 << 10:
        assert _run(p, ref_w, 1, k, xs=True) < REL_TOL
        assert _run(p, ref_w, 1, k, xs=True, warps=16) < REL_TOL


@pytest.mark.parametrize("depth", range(1, gemv_bulk.MAX_DEPTH + 1))
def test_bulk_gemv_every_depth(depth):
    weight = _weight(3000, 2000)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (1, 16):
        assert _run(p, ref_w, m, 2000, xs=False, depth=depth) < REL_TOL, m
        assert _run(p, ref_w, m, 2000, xs=False, depth=min(depth, 6), warps=16) < REL_TOL, (m, 16)


def test_bulk_gemv_slots_are_left_empty():
    # the partial row groups' slots go back to the sentinel after every call (a stale slot would be read as a
    # contribution by the next call's finisher)
    weight = _weight(5120, 17408)  # Kc = 272: every row group split over ~7 virtual blocks
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for warps in (8, 16, 8):
        assert _run(p, ref_w, 1, 17408, xs=False, warps=warps) < REL_TOL
        torch.cuda.synchronize()
        slots = gemv_bulk._slots(torch.device("cuda", torch.cuda.current_device()), 1)
        assert bool((slots == gemv_bulk.SLOT_SENTINEL).all()), warps


def test_bulk_gemv_refuses_what_it_cannot_run():
    p = ops.prepared(_weight(256, 256))
    x = torch.randn(17, 256, device="cuda").to(torch.bfloat16)
    with pytest.raises(ValueError, match="M=17"):
        gemv_bulk.gemv_bulk(x, p, torch.empty(17, 256, dtype=torch.bfloat16, device="cuda"))
    with pytest.raises(ValueError, match="depth=9"):
        gemv_bulk.gemv_bulk(x[:1], p, torch.empty(1, 256, dtype=torch.bfloat16, device="cuda"), depth=9)


def test_bulk_gemv_in_a_cuda_graph():
    # replays with new x: the workspace and counters must come back to zero after every launch
    weight = _weight(5120, 6144)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    x = torch.randn(4, 6144, device="cuda").to(torch.bfloat16)
    out = torch.empty(4, 5120, dtype=torch.bfloat16, device="cuda")
    gemv_bulk.gemv_bulk(x, p, out)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemv_bulk.gemv_bulk(x, p, out)
    for _ in range(3):
        x.copy_(torch.randn(4, 6144, device="cuda"))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = x.float() @ ref_w.t()
        assert ((out.float() - ref).norm() / ref.norm()).item() < REL_TOL

