"""NVFP4 CUDA kernels (gemv.cu, gemm.cu) against dequantize-then-f32-matmul on fresh random inputs (needs a GPU)."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, gemv_tile, naive, ops

pytestmark = pytest.mark.gpu
# [N x K]: odd small shapes, then the Qwen3.8-27B layer shapes (design.md section 1) and the LM head
SHAPES = [(200, 80), (1000, 1040), (10240, 5120), (6144, 5120), (5120, 6144), (17408, 5120), (5120, 17408),
          (12288, 5120), (248320, 5120)]
M_VALUES = [1, 3, 8, 13, 16, 27, 32, 33, 100, 257]
REL_TOL = 1e-2


def _weight(n: int, k: int, fmt: str = "modelopt") -> checkpoint.NVFP4Weight:
    w = torch.randn(n, k, device="cuda") * (0.5 + torch.rand(n, 1, device="cuda"))  # rows of varied magnitude
    return checkpoint.from_tensors(naive.quantize(w, fmt))


def _check(x: torch.Tensor, weight: checkpoint.NVFP4Weight, ref_w: torch.Tensor, direct: bool) -> float:
    """Runs the kernel on NaN-poisoned output; returns ||y - ref|| / ||ref||."""
    ref = x.float() @ ref_w.t()
    if direct:
        out = torch.full((x.shape[0], weight.shape[0]), float("nan"), dtype=torch.bfloat16, device="cuda")
        p = ops.prepared(weight)
        (ops.gemv if x.shape[0] <= ops.GEMV_MAX_M else ops.gemm)(x, p, out)
    else:
        out = ops.linear(x, weight)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any(), "unwritten or NaN outputs"
    return ((out.float() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("n,k", SHAPES, ids=lambda v: str(v))
def test_kernels_match_dequantized_matmul(n, k):
    weight = _weight(n, k)
    ref_w = weight.dequantize(torch.float32)
    ms = M_VALUES if n * k < 2e8 else [1, 13, 32, 33, 257]
    for i, m in enumerate(ms):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        err = _check(x, weight, ref_w, direct=i % 2 == 0)
        assert err < REL_TOL, (n, k, m, err)


def test_repeated_calls_leave_the_workspace_clean():
    weight = _weight(5120, 6144)
    ref_w = weight.dequantize(torch.float32)
    for m in (1, 16, 5, 32, 1):
        x = torch.randn(m, 6144, device="cuda").to(torch.bfloat16)
        assert _check(x, weight, ref_w, direct=True) < REL_TOL


def test_compressed_tensors_weight_and_batched_input():
    weight = _weight(384, 256, "compressed-tensors")
    x = torch.randn(2, 3, 256, device="cuda").to(torch.bfloat16)
    y = ops.linear(x, weight)
    ref = (x.float() @ weight.dequantize().t())
    assert y.shape == (2, 3, 384) and ((y.float() - ref).norm() / ref.norm()).item() < REL_TOL


def test_extreme_scales():
    # largest e4m3 scale (448) and subnormal ones (2^-9) in the same weight, every code
    n, k = 256, 512
    packed = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
    scale = torch.tensor([448.0, 2.0 ** -9, 1.0, 0.013671875], device="cuda").repeat(n, k // 64)
    weight = checkpoint.NVFP4Weight(packed, scale.to(torch.float8_e4m3fn), torch.tensor(0.01, device="cuda"))
    ref_w = weight.dequantize()
    for m in (1, 16, 64):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        assert _check(x, weight, ref_w, direct=True) < REL_TOL


def test_fused_shards_with_different_global_scales():
    shards = [_weight(n, 1024) for n in (1024, 256, 112)]
    for w, s in zip(shards, (1.0, 1000.0, 1e-3)):
        w.gmul = w.gmul * s
    fused = checkpoint.concat_rows(shards)
    ref_w = fused.dequantize()
    for m in (1, 16, 40):
        x = torch.randn(m, 1024, device="cuda").to(torch.bfloat16)
        y = ops.linear(x, fused).float()
        ref = x.float() @ ref_w.t()
        for a, b in [(0, 1024), (1024, 1280), (1280, 1392)]:  # each shard on its own scale
            assert ((y[:, a:b] - ref[:, a:b]).norm() / ref[:, a:b].norm()).item() < REL_TOL, (m, a)


@pytest.mark.parametrize("kernel", ["nvfp4_gemm", "nvfp4_gemm_v2"])
def test_both_gemm_versions(kernel):
    weight = _weight(640, 1088)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (33, 130):
        x = torch.randn(m, 1088, device="cuda").to(torch.bfloat16)
        out = torch.full((m, 640), float("nan"), dtype=torch.bfloat16, device="cuda")
        ops.gemm(x, p, out, kernel)
        ref = x.float() @ ref_w.t()
        assert not torch.isnan(out).any() and ((out.float() - ref).norm() / ref.norm()).item() < REL_TOL


def test_worker_linear_moves_to_gpu_and_runs_the_kernels():
    from worker.layers.linear import Linear

    cpu = checkpoint.from_tensors(naive.quantize(torch.randn(272, 320), "compressed-tensors"))
    layer = Linear(cpu).to("cuda")
    assert layer.nvfp4.packed.is_cuda and layer.nvfp4.scale.dtype == torch.float8_e4m3fn
    x = torch.randn(3, 320, device="cuda").to(torch.bfloat16)
    ref = x.float() @ cpu.dequantize().cuda().t()
    y = layer(x)
    assert y.dtype == torch.bfloat16 and ((y.float() - ref).norm() / ref.norm()).item() < REL_TOL


@pytest.mark.parametrize("n,k", [(200, 80), (1000, 1040), (9000, 320), (640, 17408)], ids=lambda v: str(v))
def test_gemv_versions_each_match(n, k):
    # v5 (every compiled ring depth, NT = 1 and 2) and v2 on their own: Kc < 8 (idle warps), 568 tiles (blocks own
    # several), long K (x too large for v5 at M > 1: refused)
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (1, 2, 5, 8, 13, 16):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        ref = x.float() @ ref_w.t()
        for depth in gemv_tile.TILE_DEPTHS[1 if m <= 8 else 2] + (None,):  # None: v2
            if depth and not gemv_tile.tile_fits(m, p, depth):
                with pytest.raises(ValueError):
                    gemv_tile.gemv_tile(x, p, torch.empty(m, n, dtype=torch.bfloat16, device="cuda"), depth)
                continue
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            gemv_tile.gemv_tile(x, p, out, depth) if depth else ops.gemv_v2(x, p, out)
            torch.cuda.synchronize()
            err = ((out.float() - ref).norm() / ref.norm()).item()
            assert not torch.isnan(out).any() and err < REL_TOL, (depth, m, err)


def test_gemv_dispatch_falls_back_to_v2():
    weight = _weight(256, 512)
    p, ref_w = ops.prepared(weight), weight.dequantize()
    aligned = torch.randn(1, 512, device="cuda").to(torch.bfloat16)
    shifted = torch.randn(1, 513, device="cuda").to(torch.bfloat16)[:, 1:]  # contiguous, 2 bytes off 16
    assert gemv_tile.tile_applies(aligned, p) and not gemv_tile.tile_applies(shifted, p)
    assert not gemv_tile.tile_applies(torch.randn(17, 512, device="cuda").to(torch.bfloat16), p)
    for x in (aligned, shifted):  # linear copies a shifted x to an aligned one
        y, ref = ops.linear(x, weight).float(), x.float() @ ref_w.t()
        assert ((y - ref).norm() / ref.norm()).item() < REL_TOL
