"""CPU tests: kernels/norm/naive.py (the fused kernels' reference) equals the torch modules of worker/layers bit for
bit in bf16, the residual form of RMSNorm, and the kernels' argument checks (no GPU needed)."""
import pytest
import torch
import torch.nn.functional as F

from kernels.norm import naive, ops
from worker.layers.norm import GatedRMSNorm, RMSNorm


def _bf16(*shape, seed=0, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen) * scale).bfloat16()


@pytest.mark.parametrize("rows,width", [(1, 64), (7, 257), (33, 1000)], ids=["1x64", "7x257", "33x1000"])
def test_naive_rms_norm_equals_module(rows, width):
    x, w = _bf16(rows, width, seed=1, scale=3.0), _bf16(width, seed=2, scale=0.1)
    want = RMSNorm(w, 1e-6)(x)
    assert torch.equal(naive.rms_norm(x, w, 1e-6), want)
    assert want.abs().max() > 0.1


def test_rms_norm_with_residual_normalises_the_sum_and_returns_it():
    x, res, w = _bf16(5, 96, seed=3), _bf16(5, 96, seed=4), _bf16(96, seed=5, scale=0.1)
    y, h = RMSNorm(w, 1e-6)(x, res)
    assert torch.equal(h, x + res)
    assert torch.equal(y, RMSNorm(w, 1e-6)(x + res))
    y2, h2 = naive.rms_norm(x, w, 1e-6, res)
    assert torch.equal(y2, y) and torch.equal(h2, h)
    assert not torch.equal(y, RMSNorm(w, 1e-6)(x))


@pytest.mark.parametrize("rows,width", [(3, 32), (48, 128), (5, 131)], ids=["3x32", "48x128", "5x131"])
def test_naive_gated_rms_norm_equals_module(rows, width):
    x, z = _bf16(rows, width, seed=6, scale=2.0), _bf16(rows, width, seed=7)
    w = (1.0 + _bf16(width, seed=8, scale=0.1).float()).bfloat16()
    want = GatedRMSNorm(w, 1e-6)(x, z)
    assert torch.equal(naive.gated_rms_norm(x, z, w, 1e-6), want)
    assert want.abs().max() > 0.1


def test_naive_silu_mul_is_the_mlp_product():
    gate, up = _bf16(4, 77, seed=9, scale=2.0), _bf16(4, 77, seed=10)
    assert torch.equal(naive.silu_mul(gate, up), F.silu(gate) * up)


def test_kernels_refuse_cpu_and_non_bf16_tensors():
    x, w = _bf16(2, 64), _bf16(64)
    assert not ops.supports(x, w)
    with pytest.raises(ops.NormKernelError):
        ops.rms_norm(x, w, 1e-6)
    with pytest.raises(ops.NormKernelError):
        ops.silu_mul(x.float(), x.float())


@pytest.mark.parametrize("width,threads", [(1, 32), (128, 32), (131, 64), (5120, 1024), (20000, 1024)])
def test_row_kernel_block_size(width, threads):
    assert ops._threads(width) == threads
