"""gemv_bc.cu's scale words (kernels/nvfp4/gemv_bc.py block_column_scales), on CPU: the kernel's reading of them
(lane 4g + t of pair p: bytes 0..3 = rows g, g, g + 8, g + 8 x columns 2t, 2t + 1, 2t, 2t + 1; column j = block j % 4
of chunk 2p + j // 4) recovers every block scale at its (row, k block), and the kernel's sum over block columns
reproduces the naive dequantized matmul, so layout bugs show up without a GPU."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, gemv_bc, naive, ops
from tests.unit.test_nvfp4_repack import _kernel_view


def _scales_as_kernel_reads(wsb: torch.Tensor, np_: int) -> torch.Tensor:
    """wsb int32 [Np/16, Kp, 32] -> the e4m3 byte each lane applies, placed at (row, 16-k block): u8 [Np, Kp * 8]."""
    r, kp = wsb.shape[:2]
    raw = wsb.contiguous().view(torch.uint8).reshape(r, kp, 8, 4, 4)  # [r, p, g, t, byte]
    dense = torch.zeros(r, 2, 8, kp, 8, dtype=torch.uint8)  # [r, hr, g, p, column]
    for byte in range(4):
        hr, col_lo = byte >> 1, byte & 1
        for t in range(4):
            dense[:, hr, :, :, 2 * t + col_lo] = raw[:, :, :, t, byte].permute(0, 2, 1)
    return dense.reshape(np_, kp * 8)


@pytest.mark.parametrize("n,k", [(128, 128), (48, 80), (256, 1040), (130, 208)], ids=lambda v: str(v))
def test_scale_words_hold_each_block_scale_where_the_kernel_reads_it(n, k):
    torch.manual_seed(n * k)
    weight = checkpoint.from_tensors(naive.quantize(torch.randn(n, k), "modelopt"))
    weight.scale = torch.randint(1, 0x7F, weight.scale.shape, dtype=torch.uint8).view(torch.float8_e4m3fn)
    p = gemv_bc.prepared_bc(ops.repack(weight))
    kp = (p["Kc"] + 1) // 2
    assert p["wsb"].shape == (p["Np"] // 16, kp, 32) and p["wsb"].dtype == torch.int32
    got = _scales_as_kernel_reads(p["wsb"], p["Np"])
    want = torch.zeros(p["Np"], kp * 8, dtype=torch.uint8)
    want[:n, : k // 16] = weight.scale.view(torch.uint8)
    assert torch.equal(got, want)


def test_block_column_sums_reproduce_the_matmul():
    # the kernel's arithmetic in f64: unscaled codes x (x * 2^100) per block column, times the column's scale, summed,
    # times alpha_bc, equals x W^T (W dequantized by the naive path)
    torch.manual_seed(3)
    n, k = 160, 1040  # Kc = 17: the last pair's second chunk is padding
    weight = checkpoint.from_tensors(naive.quantize(torch.randn(n, k) * 2, "compressed-tensors"))
    p = gemv_bc.prepared_bc(ops.repack(weight))
    kp = (p["Kc"] + 1) // 2
    unit = {**p, "wsc": torch.full_like(p["wsc"], 0x38)}  # every scale 1.0: the codes as decode_word_raw gives them
    codes = _kernel_view(unit).double() * 2.0 ** 62 / 2.0 ** 126  # e2m1 * 2^-126
    codes = torch.nn.functional.pad(codes, (0, kp * 128 - codes.shape[1]))
    x = torch.randn(kp * 128, dtype=torch.float64)
    x[k:] = 0
    per_block = (codes * (x * 2.0 ** 100)).reshape(p["Np"], kp * 8, 16).sum(-1)  # the C columns
    scales = _scales_as_kernel_reads(p["wsb"], p["Np"]).view(torch.float8_e4m3fn).double()
    y = (per_block * scales).sum(-1).reshape(-1, 16) * p["alpha_bc"].double()[:, None]
    w = naive.dequantize(weight.packed, weight.scale, 1.0).double() * weight.gmul.double()
    ref = x[:k] @ w.t()
    assert torch.allclose(y.reshape(-1)[:n], ref, rtol=1e-12, atol=1e-12)
