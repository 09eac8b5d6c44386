"""gemm_wsb.cuh (bulk-copied stages of several chunks, one token tile; kernels/nvfp4/gemm_ws.py launch_bulk) against
dequantize-then-f32-matmul, fresh random inputs, outputs NaN-poisoned (needs sm_90)."""
import pytest
import torch

from kernels.nvfp4 import gemm_wgmma, gemm_ws, ops
from tests.kernels.test_nvfp4_gemm_ws import REL_TOL, _check_graph_replays, _err, _poisoned, _weight

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("build", sorted(gemm_ws.WSB_CONFIGS), ids=lambda b: f"T{b[0]}b{b[1]}")
def test_every_wsb_build(build):
    # N % 128 != 0, K % 64 != 0 (K = 1008, Kc = 16: a zero-coded tail), long K (Kc = 272: the ring wraps many
    # times); M from 1 to T; S = 1, 3 and one stage a block
    tile, blocks = build
    for n, k in [(1000, 1008), (384, 17408), (2176, 5120)]:
        weight = _weight(n, k)
        ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
        for m in (1, 17, tile):
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            ref = x.float() @ ref_w.t()
            for splits in (1, 3, p["Kc"] // gemm_ws.WSB_CONFIGS[build][0]):
                out = gemm_ws.launch_bulk(x, p, _poisoned(m, n), splits, tile, blocks)
                torch.cuda.synchronize()
                assert _err(out, ref) < REL_TOL, (n, k, m, splits)


def test_wsb_as_dispatched_and_graph_replay(monkeypatch):
    # 16384 x 1024 (128 row tiles: one wave on the H200's 132 SMs) at 24 rows: gemm_wgmma's default launch is the
    # wsb kernel there; captured in a CUDA graph after a warm-up, then replayed on new x in place
    calls, real = [], gemm_ws.launch_bulk
    monkeypatch.setattr(gemm_ws, "launch_bulk", lambda *a: calls.append(a[3:]) or real(*a))
    weight = _weight(16384, 1024)
    ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
    x = torch.randn(24, 1024, device="cuda").to(torch.bfloat16)
    out = _poisoned(24, p["N"])
    gemm_wgmma.gemm_wgmma(x, p, out)
    torch.cuda.synchronize()
    assert _err(out, x.float() @ ref_w.t()) < REL_TOL and calls == [(1, 32, 1)]
    _check_graph_replays(lambda: gemm_wgmma.gemm_wgmma(x, p, out), x, out, ref_w)


def test_wsb_checks_arguments():
    p = ops.prepared(_weight(256, 1024))
    with pytest.raises(ValueError, match="M <= T"):
        gemm_ws.launch_bulk(torch.zeros(33, 1024, device="cuda", dtype=torch.bfloat16), p, _poisoned(33, 256), 1, 32)
    with pytest.raises(ValueError, match="splits must be"):
        gemm_ws.launch_bulk(torch.zeros(8, 1024, device="cuda", dtype=torch.bfloat16), p, _poisoned(8, 256), 5, 32)
    p = ops.prepared(_weight(256, 1040))  # Kc = 17
    with pytest.raises(ValueError, match="Kc % CH"):
        gemm_ws.launch_bulk(torch.zeros(8, 1040, device="cuda", dtype=torch.bfloat16), p, _poisoned(8, 256), 1, 32)
