"""NVFP4 wgmma GEMM, stream-K kernels (gemm_wgmma.cu gemm_stream_k) against dequantize-then-f32-matmul on fresh
random inputs, outputs NaN-poisoned first (needs an sm_90 GPU)."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, gemm_wgmma, naive, ops, streamk

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2


def _case(n: int, k: int):
    w = torch.randn(n, k, device="cuda") * (0.5 + torch.rand(n, 1, device="cuda"))
    weight = checkpoint.from_tensors(naive.quantize(w, "modelopt"))
    return weight.dequantize(torch.float32), ops.prepared(weight)


def _check(ref_w, p, m: int, **kw) -> float:
    x = torch.randn(m, p["K"], device="cuda").to(torch.bfloat16)
    out = torch.full((m, p["N"]), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm_wgmma.gemm_wgmma(x, p, out, **kw)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any(), f"unwritten outputs {kw}"
    ref = x.float() @ ref_w.t()
    return ((out.float() - ref).norm() / ref.norm()).item()


# tiles against the SMs: fewer tiles than SMs (every tile cut), one wave and a remainder, several waves; N and K
# off the 128-row and 64-k grid; M with partial token tiles
@pytest.mark.parametrize("n,k", [(5120, 6144), (17408, 5120), (1000, 5200), (2200, 17408)], ids=str)
@pytest.mark.parametrize("tile", [128, 256], ids=lambda t: f"T{t}")
def test_stream_k_matches_dequantized_matmul(n, k, tile):
    ref_w, p = _case(n, k)
    for m in (33, 96, 128, 257, 512, 1000):
        for waves in (0, 1, 2):
            err = _check(ref_w, p, m, tile=tile, stream_k=waves)
            assert err < REL_TOL, (n, k, m, tile, waves, err)



@pytest.mark.parametrize("ws_main_loop", [True, False], ids=["ws_skm", "skm"])
def test_t128_stream_k_for_decode_batches(ws_main_loop, monkeypatch):
    # T = 128, no whole tiles first: gemm_ws_sk.cuh's kernel (streamk.WS) or gemm_stream_k.cuh's _skm, at the rows
    # streamk.choice sends there (65-128) and past one token tile; the dispatched call (stream_k -1) too
    monkeypatch.setattr(streamk, "WS", ws_main_loop)
    for n, k in [(17408, 5120), (5120, 17408), (1000, 5200)]:
        ref_w, p = _case(n, k)
        for m in (65, 100, 128, 200):
            err = _check(ref_w, p, m, tile=128, stream_k=0)
            assert err < REL_TOL, (n, k, m, err)
        assert _check(ref_w, p, 96) < REL_TOL
    flags = gemm_wgmma._SCRATCH[("stream_k_flags", torch.device("cuda", torch.cuda.current_device()))][-1]
    assert not flags.any(), "stream-K flags left set"


def test_stream_k_flags_come_back_to_zero():
    # every finisher clears the flags it waited on: repeated calls on alternating shapes stay correct, and the flags
    # are all zero between launches (a stale flag would let a finisher read a partial before it is written)
    cases = [_case(5120, 6144), _case(1000, 5200)]
    for round_ in range(3):
        for (ref_w, p), m in zip(cases, (512, 700)):
            assert _check(ref_w, p, m, stream_k=round_ % 2) < REL_TOL
    flags = gemm_wgmma._SCRATCH[("stream_k_flags", torch.device("cuda", torch.cuda.current_device()))][-1]
    assert not flags.any(), "stream-K flags left set"


@pytest.mark.parametrize("m,tile", [(512, 0), (96, 128)], ids=["T256", "T128_ws"])
def test_stream_k_cuda_graph_replays(m, tile):
    ref_w, p = _case(6144, 5120)
    x = torch.randn(m, 5120, device="cuda").to(torch.bfloat16)
    y = torch.empty(m, 6144, dtype=torch.bfloat16, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on the capture stream: compiles, grows the workspace
        gemm_wgmma.gemm_wgmma(x, p, y, tile=tile, stream_k=0)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm_wgmma.gemm_wgmma(x, p, y, tile=tile, stream_k=0)
    for _ in range(3):
        x.copy_(torch.randn_like(x, dtype=torch.float32))
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = x.float() @ ref_w.t()
        assert ((y.float() - ref).norm() / ref.norm()).item() < REL_TOL


def test_stream_k_rejects_what_it_cannot_run():
    _, p = _case(256, 128)
    x = torch.randn(64, 128, device="cuda").to(torch.bfloat16)
    out = torch.empty(64, 256, dtype=torch.bfloat16, device="cuda")
    for kw in ({"tile": 64}, {"splits": 2}, {"permute": False}, {"fence": False}, {"diag": "_nox"}):
        with pytest.raises(ValueError, match="stream-K"):
            gemm_wgmma.gemm_wgmma(x, p, out, stream_k=0, **kw)
