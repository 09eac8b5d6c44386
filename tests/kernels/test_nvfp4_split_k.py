"""NVFP4 split-K GEMV flushes (gemv.cu: v7 vector reductions, v2 scalar reductions; gemv_cluster.cu: reduction in a
thread-block cluster) against dequantize-then-f32-matmul
on fresh random inputs and NaN-poisoned outputs, alone, chained, and replayed in a CUDA graph (needs a GPU)."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, naive, ops

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2


def _weight(n: int, k: int) -> checkpoint.NVFP4Weight:
    w = torch.randn(n, k, device="cuda") * (0.5 + torch.rand(n, 1, device="cuda"))
    return checkpoint.from_tensors(naive.quantize(w, "modelopt"))


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.float() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("variant,xs", [("", False), ("", True), ("_atomic", False)], ids=["v7", "v8_xs", "v2"])
@pytest.mark.parametrize("n,k", [(200, 80), (1000, 1040), (6144, 5120), (5120, 17408)], ids=lambda v: str(v))
def test_split_k_flushes_match(variant, xs, n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (1, 5, 8, 13, 16, 27, 32, 1):  # the last M = 1 checks that M = 32 left the workspace clean
        if xs and (m > 16 or m * p["Kc"] * 128 > ops.XS_MAX_BYTES):  # x must fit in shared memory
            continue
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        ops.gemv_v2(x, p, out, variant, xs=xs)
        torch.cuda.synchronize()
        assert not torch.isnan(out).any() and _rel(out, x.float() @ ref_w.t()) < REL_TOL, (variant, m)


@pytest.mark.parametrize("cs", range(1, 9))
@pytest.mark.parametrize("n,k", [(200, 528), (6144, 5120), (5120, 17408)], ids=lambda v: str(v))
def test_cluster_split_k_matches(cs, n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (1, 5, 8, 13, 16, 27, 32):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        ops.gemv_cluster(x, p, out, cs)
        torch.cuda.synchronize()
        assert not torch.isnan(out).any() and _rel(out, x.float() @ ref_w.t()) < REL_TOL, (cs, m)


def test_gemv_default_picks_the_cluster_kernel_where_it_fills_the_gpu():
    weight = _weight(16384, 1024)  # 128 row groups: 256 blocks of 2 on 132 SMs
    p = ops.prepared(weight)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert ops.cluster_size(p, sms) == (2 if sms == 132 else ops.cluster_size(p, sms))
    x = torch.randn(16, 1024, device="cuda").to(torch.bfloat16)
    out = torch.full((16, 16384), float("nan"), dtype=torch.bfloat16, device="cuda")
    ops.gemv(x, p, out)
    assert _rel(out, x.float() @ weight.dequantize().t()) < REL_TOL


def _chain(x, weights):
    """y_{i+1} = y_i W_i^T through the split-K GEMV, each launch reading the previous one's output."""
    y = x
    for w in weights:
        out = torch.full((y.shape[0], w.shape[0]), float("nan"), dtype=torch.bfloat16, device="cuda")
        y = ops.gemv_v2(y, ops.prepared(w), out)
    return y


def _chain_ref(x, weights):
    y = x.float()
    for w in weights:
        y = (y.to(torch.bfloat16).float() @ w.dequantize().t()).to(torch.bfloat16).float()
    return y


def test_chain_replayed_in_a_cuda_graph():
    # the workspace must come back zeroed after every launch, also across graph replays with new inputs
    torch.manual_seed(1)
    weights = [_weight(2048, 2048) for _ in range(8)]
    for w in weights:  # keep magnitudes ~1 along the chain
        w.gmul = w.gmul / 45.0
    x = torch.randn(16, 2048, device="cuda").to(torch.bfloat16)
    _chain(x, weights)  # compile and size the workspace outside the capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        y = _chain(x, weights)
    for _ in range(3):
        y.fill_(float("nan"))
        x.copy_(torch.randn(16, 2048, device="cuda").to(torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        assert not torch.isnan(y).any() and _rel(y, _chain_ref(x, weights)) < 5e-2
