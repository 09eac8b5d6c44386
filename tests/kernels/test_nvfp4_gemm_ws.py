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


@pytest.mark.parametrize("mode", gemm_ws.WS_MODES, ids=lambda m: m or "bulk")
@pytest.mark.parametrize("tile", gemm_ws.WS_TILES, ids=lambda t: f"T{t}")
def test_every_ws_kernel(tile, mode):
    # N % 128 != 0, K % 64 != 0 (Kc = 17, 81: odd tails), long K (Kc = 272: the 8-stage ring wraps 34 times);
    # partial token tiles; S = 1 equals gemm_wgmma's kernel bit for bit (same chunk order), splits within tolerance
    for n, k in [(1000, 1040), (272, 5184), (384, 17408)]:
        weight = _weight(n, k)
        ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
        for m in (5, 24, 33, tile + 1, 3 * tile - 5):
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            ref = x.float() @ ref_w.t()
            for splits in (1, 3, p["Kc"]):  # Kc: one chunk a block
                out = gemm_ws.gemm_ws(x, p, _poisoned(m, n), tile=tile, splits=splits, mode=mode)
                torch.cuda.synchronize()
                assert _err(out, ref) < REL_TOL, (n, k, m, splits)
                if splits == 1:
                    twin = gemm_wgmma.gemm_wgmma(x, p, _poisoned(m, n), tile=tile, splits=1)
                    assert torch.equal(out, twin), (n, k, m)


def test_ws_pick_and_graph_replay():
    # tile = 0: pick's (T, S) for 40 rows of the 27B gate + up shape (T = 64, split-K); captured in a CUDA graph
    # after a warm-up, then replayed on new x in place
    weight = _weight(34816 // 4, 5120)
    ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
    x = torch.randn(40, 5120, device="cuda").to(torch.bfloat16)
    out = _poisoned(40, p["N"])
    gemm_ws.gemm_ws(x, p, out)
    torch.cuda.synchronize()
    assert _err(out, x.float() @ ref_w.t()) < REL_TOL
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm_ws.gemm_ws(x, p, out)
    for _ in range(2):
        x.copy_(torch.randn_like(x, dtype=torch.float32).to(torch.bfloat16))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _err(out, x.float() @ ref_w.t()) < REL_TOL


def test_ws_refuses_big_tiles():
    weight = _weight(256, 128)
    p = ops.prepared(weight)
    x = torch.randn(200, 128, device="cuda").to(torch.bfloat16)
    with pytest.raises(ValueError, match="tile must be one of"):
        gemm_ws.gemm_ws(x, p, _poisoned(200, 256), tile=128)
