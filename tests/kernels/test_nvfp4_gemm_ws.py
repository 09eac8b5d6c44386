"""The warp-specialised NVFP4 GEMM kernels (gemm_ws.cuh via kernels/nvfp4/gemm_ws.py) against dequantize-then-f32-
matmul and against gemm_wgmma's kernels on the same tile, fresh random inputs, outputs NaN-poisoned (needs sm_90)."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, gemm_wgmma, gemm_ws, naive, ops

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2


def _weight(n: int, k: int) -> checkpoint.NVFP4Weight:
    w = torch.randn(n, k, device="cuda") * (0.5 + torch.rand(n, 1, device="cuda"))
    return checkpoint.from_tensors(naive.quantize(w, "modelopt"))


def _poisoned(m: int, n: int) -> torch.Tensor:
    return torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")


def _err(out: torch.Tensor, ref: torch.Tensor) -> float:
    assert not torch.isnan(out).any(), "unwritten or NaN outputs"
    return ((out.float() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("tile", gemm_ws.WS_TILES, ids=lambda t: f"T{t}")
def test_every_ws_kernel(tile):
    # N % 128 != 0, K % 64 != 0 (Kc = 17, 81: odd tails), long K (Kc = 272: the ring wraps 34-45 times); partial
    # token tiles; S = 1 equals gemm_wgmma's own kernel of the tile bit for bit (the same chunk order), S > 1 within
    # tolerance
    for n, k in [(1000, 1040), (272, 5184), (384, 17408)]:
        weight = _weight(n, k)
        ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
        for m in (5, 33, tile + 1, 3 * tile - 5):
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            ref = x.float() @ ref_w.t()
            for splits in (1, 3, p["Kc"]):  # Kc: one chunk a block
                out = gemm_ws.gemm_ws(x, p, _poisoned(m, n), splits=splits, tile=tile)
                torch.cuda.synchronize()
                assert _err(out, ref) < REL_TOL, (n, k, m, splits)
                if splits == 1:
                    twin = gemm_wgmma.gemm_wgmma(x, p, _poisoned(m, n), tile=tile, splits=1, use_ws=False)
                    assert torch.equal(out, twin), (n, k, m)


def test_ws_pick_and_graph_replay():
    # pick's S for 40 rows of a quarter of the 27B gate + up shape (split-K); captured in a CUDA graph
    # after a warm-up, then replayed on new x in place
    weight = _weight(34816 // 4, 5120)
    ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
    x = torch.randn(40, 5120, device="cuda").to(torch.bfloat16)
    out = _poisoned(40, p["N"])
    gemm_ws.gemm_ws(x, p, out)
    torch.cuda.synchronize()
    assert _err(out, x.float() @ ref_w.t()) < REL_TOL
    _check_graph_replays(lambda: gemm_ws.gemm_ws(x, p, out), x, out, ref_w)


def _check_graph_replays(run, x: torch.Tensor, out: torch.Tensor, ref_w: torch.Tensor) -> None:
    """run() (warmed up) captured in a CUDA graph, replayed twice on new x in place: out against x @ ref_w^T."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    for _ in range(2):
        x.copy_(torch.randn_like(x, dtype=torch.float32).to(torch.bfloat16))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _err(out, x.float() @ ref_w.t()) < REL_TOL


def test_ws_checks_arguments():
    weight = _weight(256, 128)
    p = ops.prepared(weight)
    x = torch.randn(40, 128, device="cuda").to(torch.bfloat16)
    with pytest.raises(ValueError, match="splits must be"):
        gemm_ws.gemm_ws(x, p, _poisoned(40, 256), splits=p["Kc"] + 1)
    with pytest.raises(ValueError, match="tile must be one of"):
        gemm_ws.gemm_ws(x, p, _poisoned(40, 256), tile=256)
    with pytest.raises(ValueError, match="out must be"):
        gemm_ws.gemm_ws(x, p, _poisoned(41, 256))


def test_gemm_wgmma_sends_t64_here(monkeypatch):
    # gemm_wgmma's default-family T = 64 / 128 launches run gemm_ws.launch; T = 256, the _s6 ring and use_ws=False
    # do not
    calls = []
    real = gemm_ws.launch
    monkeypatch.setattr(gemm_ws, "WS_GEMM", True)
    monkeypatch.setattr(gemm_ws, "launch", lambda *a: calls.append(a[3]) or real(*a))
    weight = _weight(640, 1024)
    ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
    x = torch.randn(48, 1024, device="cuda").to(torch.bfloat16)
    for kw, expect in [({}, 1), ({"tile": 64, "splits": 2}, 2), ({"tile": 128}, 3), ({"tile": 256}, 3),
                       ({"tile": 64, "diag": "_s6"}, 3), ({"tile": 64, "use_ws": False}, 3)]:
        out = gemm_wgmma.gemm_wgmma(x, p, _poisoned(48, 640), **kw)
        torch.cuda.synchronize()
        assert len(calls) == expect and _err(out, x.float() @ ref_w.t()) < REL_TOL, (kw, calls)

