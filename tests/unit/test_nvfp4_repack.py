"""NVFP4 load-time repack (CPU): emulates the CUDA kernels' bit decode and fragment indexing in torch and checks that
they recover exactly the naive dequantization, so layout bugs show up without a GPU."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, naive, ops

MASK = 0x81C081C0


def _bf16(bits: torch.Tensor) -> torch.Tensor:
    """int64 [...] holding 16-bit patterns -> their bf16 values as f32 (subnormals kept)."""
    signed = torch.where(bits >= 1 << 15, bits - (1 << 16), bits).to(torch.int16)
    return signed.view(torch.bfloat16).float()


def _rotr(q: torch.Tensor, r: int) -> torch.Tensor:
    return ((q >> r) | (q << (32 - r))) & ((1 << 32) - 1)


def _decode(q: torch.Tensor) -> list:
    """u32 words (int64) -> the 4 bf16x2 outputs of common.cuh decode_word (before scaling), as int64 bits."""
    o3 = (_rotr(q, 14) & 0x00400040) | (_rotr(q, 6) & 0x81808180)
    return [q & MASK, _rotr(q, 4) & MASK, _rotr(q, 10) & MASK, o3]


def _scale_value(b: torch.Tensor) -> torch.Tensor:
    """e4m3 bytes (int64) -> value * 2^64 as common.cuh e4m3_scaled_bf16x2 computes it (f32, exact)."""
    e, m = (b >> 3) & 15, b & 7
    normal = ((b & 0x7F) << 20) + (184 << 23)
    v = torch.where(e > 0, normal.to(torch.int32).view(torch.float32), m.float() * 2.0 ** 55)
    return torch.where(b & 0x80 > 0, -v, v)


def _kernel_view(p: dict) -> torch.Tensor:
    """Dense [Np, Kc*64] f32 of the A values the kernels feed to MMA, placed back at their real (row, k)."""
    r, kc = p["Np"] // 16, p["Kc"]
    words = p["wq"].view(torch.int32).to(torch.int64) & ((1 << 32) - 1)  # [r, kc, 32 lanes, 4 steps]
    sc = p["wsc"].to(torch.int64)  # [r, kc, 32, 2]
    scale_g, scale_g8 = _scale_value(sc[..., 0]), _scale_value(sc[..., 1])
    dense = torch.zeros(r, 2, 8, kc, 4, 4, 2, 2)  # [r, hr, g, c, t, st, p, h]
    outs = _decode(words)
    for j, (hr, pair) in enumerate([(0, 0), (1, 0), (0, 1), (1, 1)]):
        scale = scale_g if hr == 0 else scale_g8
        for h in range(2):
            val = _bf16((outs[j] >> (16 * h)) & 0xFFFF) * scale[..., None]  # [r, kc, 32, 4 steps]
            val = val.reshape(r, kc, 8, 4, 4)  # lane = 4g + t
            dense[:, hr, :, :, :, :, pair, h] = val.permute(0, 2, 1, 3, 4)
    return dense.reshape(p["Np"], kc * 64)


@pytest.mark.parametrize("n,k", [(128, 64), (48, 80), (256, 192), (130, 1040)], ids=lambda v: str(v))
def test_repacked_fragments_decode_to_the_naive_weights(n, k):
    torch.manual_seed(n + k)
    weight = checkpoint.from_tensors(naive.quantize(torch.randn(n, k) * 3, "modelopt"))
    # every code and scale byte appears: overwrite with uniform random codes and a wide range of scales
    weight.packed = torch.randint(0, 256, weight.packed.shape, dtype=torch.uint8)
    weight.scale = torch.randint(0, 0x7F, weight.scale.shape, dtype=torch.uint8).view(torch.float8_e4m3fn)
    p = ops.repack(weight)
    assert p["wq"].shape == (p["Np"] // 16, p["Kc"], 32, 16) and p["Np"] % 128 == 0
    got = _kernel_view(p) * 2.0 ** 62  # A = e2m1 * s * 2^-62
    want = naive.dequantize(weight.packed, weight.scale, 1.0)
    assert torch.equal(got[:n, :k], want)
    assert got[n:].abs().sum() == 0 and got[:, k:].abs().sum() == 0
    assert torch.equal(p["alpha"], torch.full((p["Np"] // 16,), float(weight.gmul) * 2.0 ** 62))


def test_cpu_linear_uses_the_naive_path():
    torch.manual_seed(5)
    weight = checkpoint.from_tensors(naive.quantize(torch.randn(40, 32), "compressed-tensors"))
    x = torch.randn(3, 2, 32)
    y = ops.linear(x, weight)
    assert y.shape == (3, 2, 40)
    assert torch.allclose(y, x @ weight.dequantize().t(), rtol=1e-5, atol=1e-5)


def test_fused_shards_keep_their_own_global_scale():
    torch.manual_seed(6)
    shards = [checkpoint.from_tensors(naive.quantize(torch.randn(n, 64) * s, "modelopt"))
              for n, s in [(48, 1.0), (32, 100.0), (16, 0.01)]]
    fused = checkpoint.concat_rows(shards)
    assert fused.shape == (96, 64) and fused.gmul.shape == (96,)
    assert torch.equal(fused.dequantize(), torch.cat([w.dequantize() for w in shards]))
    alpha = ops.repack(fused)["alpha"]
    assert alpha.shape == (128 // 16,)
    assert alpha[:3].eq(float(shards[0].gmul) * 2.0 ** 62).all() and alpha[5] == float(shards[2].gmul) * 2.0 ** 62
    same = checkpoint.concat_rows([shards[0], shards[0]])
    assert same.gmul.dim() == 0


def test_shards_split_inside_a_tile_are_refused():
    shards = [checkpoint.from_tensors(naive.quantize(torch.randn(n, 32) * s, "modelopt")) for n, s in [(8, 1), (8, 9)]]
    with pytest.raises(ValueError, match="multiples of 16"):
        ops.repack(checkpoint.concat_rows(shards))
