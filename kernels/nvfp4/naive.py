"""Worker process (CPU path) and kernel tests: plain-torch NVFP4 quantize / dequantize, the oracle for the CUDA kernels.

Letters: N out features (weight rows), K in features (K % 16 == 0), M activation rows.
Format (model-spec.md section 2): E2M1 codes, two per byte with element 2j in the low nibble, one e4m3 scale
per 16 consecutive elements along K, one f32 global scale. W[n,k] = e2m1(code) * float(scale[n,k//16]) * gmul,
gmul = `weight_scale_2` (ModelOpt, multiplier) = 1 / `weight_global_scale` (compressed-tensors, divisor).
"""
import torch

BLOCK = 16
E2M1_MAX = 6.0
E4M3_MAX = 448.0
# magnitude of codes 0..7; codes 8..15 are the same with the sign bit (bit 3) set
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
# midpoints between neighbouring magnitudes; a value on a midpoint rounds to the even code (even mantissa)
E2M1_BOUNDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
FORMATS = ("modelopt", "compressed-tensors")


def e2m1_table(device=None) -> torch.Tensor:
    """[16] f32: value of each 4-bit code (8 = -0.0)."""
    mags = torch.tensor(E2M1_MAGNITUDES, dtype=torch.float32, device=device)
    return torch.cat([mags, -mags])


def round_to_e2m1(v: torch.Tensor) -> torch.Tensor:
    """v [...] f32 (already divided by its scales) -> codes [...] u8 in 0..15, round-to-nearest-even, saturating at 6."""
    mag = v.abs()
    bounds = torch.tensor(E2M1_BOUNDS, dtype=mag.dtype, device=mag.device)
    below = torch.searchsorted(bounds, mag, right=False)  # bounds strictly below mag
    upto = torch.searchsorted(bounds, mag, right=True)  # bounds <= mag
    tie = below != upto
    code = torch.where(tie & (below % 2 == 1), upto, below)
    sign = (v < 0).to(torch.int64) << 3
    return (code | sign).to(torch.uint8)


def pack_codes(codes: torch.Tensor) -> torch.Tensor:
    """codes [N, K] u8 (0..15) -> packed [N, K/2] u8, element 2j in the low nibble."""
    return codes[:, 0::2] | (codes[:, 1::2] << 4)


def unpack_codes(packed: torch.Tensor) -> torch.Tensor:
    """packed [N, K/2] u8 -> codes [N, K] u8."""
    low, high = packed & 0x0F, packed >> 4
    return torch.stack([low, high], dim=-1).reshape(packed.shape[0], -1)


def dequantize(packed: torch.Tensor, scale: torch.Tensor, gmul, dtype=torch.float32) -> torch.Tensor:
    """packed [N, K/2] u8, scale [N, K/16] float8_e4m3fn, gmul f32 multiplier [] (or [N] per row, for fused shards)
    -> W [N, K] in `dtype` (math in f32)."""
    codes = unpack_codes(packed).to(torch.int64)
    values = e2m1_table(packed.device)[codes]
    block_scale = scale.float().repeat_interleave(BLOCK, dim=1)
    gmul = torch.as_tensor(gmul, dtype=torch.float32, device=packed.device)
    gmul = gmul.reshape(()) if gmul.numel() == 1 else gmul.reshape(-1, 1)
    return (values * block_scale * gmul).to(dtype)


def _codes(wf: torch.Tensor, div: torch.Tensor, rows: int = 4096) -> torch.Tensor:
    """wf [N, K] f32, div [N, K/16] per-block divisors -> codes [N, K] u8; row slices bound the temporaries."""
    out = torch.empty(wf.shape, dtype=torch.uint8, device=wf.device)
    for r in range(0, wf.shape[0], rows):
        out[r:r + rows] = round_to_e2m1(wf[r:r + rows] / div[r:r + rows].repeat_interleave(BLOCK, dim=1))
    return out


def _block_amax(w: torch.Tensor) -> torch.Tensor:
    n, k = w.shape
    if k % BLOCK:
        raise ValueError(f"NVFP4 needs in_features % {BLOCK} == 0, got {k}")
    return w.reshape(n, k // BLOCK, BLOCK).abs().amax(dim=-1)


def quantize_modelopt(w: torch.Tensor) -> dict:
    """w [N, K] float -> {"weight" u8 [N,K/2], "weight_scale" e4m3 [N,K/16], "weight_scale_2" f32 []} (ModelOpt).

    s2 = amax|W| / (6*448); s_b = e4m3(amax_block / (6*s2)) with zeros -> 1; code = rne_e2m1(W / (s_b*s2)).
    """
    wf = w.float()
    amax = wf.abs().amax()
    s2 = torch.where(amax > 0, amax / (E2M1_MAX * E4M3_MAX), torch.ones_like(amax))
    block = _block_amax(wf) / (E2M1_MAX * s2)
    block = torch.where(block == 0, torch.ones_like(block), block)
    scale = block.clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)
    div = scale.float() * s2
    div = torch.where(div == 0, torch.ones_like(div), div)
    return {"weight": pack_codes(_codes(wf, div)), "weight_scale": scale, "weight_scale_2": s2.reshape(())}


def quantize_compressed_tensors(w: torch.Tensor) -> dict:
    """w [N, K] float -> {"weight_packed" u8, "weight_scale" e4m3, "weight_global_scale" f32 [1]} (compressed-tensors).

    G = 448*6 / amax|W|; s_b = e4m3(clamp(G*amax_block/6, 448)) with zeros -> 0.125; code = rne_e2m1(W / (s_b/G)).
    """
    wf = w.float()
    amax = wf.abs().amax()
    gscale = torch.where(amax > 0, (E2M1_MAX * E4M3_MAX) / amax, torch.ones_like(amax))
    block = (gscale * _block_amax(wf) / E2M1_MAX).clamp(max=E4M3_MAX)
    scale = block.to(torch.float8_e4m3fn)
    scale = torch.where(scale.float() == 0, torch.full_like(block, 0.125), scale.float()).to(torch.float8_e4m3fn)
    div = scale.float() / gscale
    return {"weight_packed": pack_codes(_codes(wf, div)), "weight_scale": scale, "weight_global_scale": gscale.reshape(1)}


def quantize(w: torch.Tensor, fmt: str = "modelopt") -> dict:
    """w [N, K] -> the tensors one Linear holds in checkpoint layout `fmt` (names without the module prefix)."""
    if fmt == "modelopt":
        return quantize_modelopt(w)
    if fmt == "compressed-tensors":
        return quantize_compressed_tensors(w)
    raise ValueError(f"unknown NVFP4 format {fmt!r}; expected one of {FORMATS}")


def linear(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, gmul) -> torch.Tensor:
    """x [M, K] (any float dtype) -> y [M, N] in x's dtype: dequantize to f32, f32 matmul (the kernels' oracle)."""
    w = dequantize(packed, scale, gmul, torch.float32)
    return (x.float() @ w.t()).to(x.dtype)
