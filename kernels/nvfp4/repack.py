"""Worker process: the load-time repack of NVFP4 weights into per-warp MMA fragments (layout in kernels/nvfp4/ops.py's
header and common.cuh), cached on the weight per device. Pure torch: runs (and is tested) on CPU."""
import torch

from kernels.nvfp4 import naive
from kernels.nvfp4.checkpoint import NVFP4Weight

ROW_GROUP = 128  # weight rows per GEMV block (8 warps x 16-row tiles); N is padded to it
CHUNK = 64  # k per fragment chunk (4 scale blocks); K is padded to it


# Bit layout of a fragment word (common.cuh decode_word): output j (A register j: (hr, p) = (0,0), (1,0), (0,1),
# (1,1)) is rotr(word, r) & mask, i.e. its bf16 field bit b of half h (m -> 6, e0 -> 7, e1 -> 8, sign -> 15, + 16h)
# sits at word bit (b + 16h + r) mod 32, with r per field below. No layout decodes all four with one rotation each
# (4 translates of {6, 7, 8, 15} do not tile 16 bits: exhaustive search); this one needs 9 ALU ops per word.
FIELD_BITS = (6, 7, 8, 15)  # m, e0, e1, sign of an E2M1 code (its bits 0..3) in a bf16 half
FIELD_ROT = ((0, 0, 0, 0), (4, 4, 4, 4), (10, 10, 10, 10), (14, 6, 6, 6))


def _place_bits(frag: torch.Tensor) -> torch.Tensor:
    """frag u8 [..., hr, p, h] codes of each fragment word -> the words' bits (int64 [...]), layout FIELD_ROT."""
    words = torch.zeros(frag.shape[:-3], dtype=torch.int64, device=frag.device)
    for j, (hr, p) in enumerate(((0, 0), (1, 0), (0, 1), (1, 1))):
        for h in range(2):
            c = frag[..., hr, p, h].to(torch.int64)
            for field, (out_bit, rot) in enumerate(zip(FIELD_BITS, FIELD_ROT[j])):
                words |= ((c >> field) & 1) << ((out_bit + 16 * h + rot) % 32)
    return words


def repack(weight: NVFP4Weight) -> dict:
    """-> {"wq" u8 [Np/16, Kc, 32, 16], "wsc" u8 [Np/16, Kc, 32, 2], "alpha" f32 [Np/16], N, K, Np, Kc} on weight's
    device."""
    n, k = weight.shape
    np_, kc = -(-n // ROW_GROUP) * ROW_GROUP, -(-k // CHUNK)
    codes = torch.zeros(np_, kc * CHUNK, dtype=torch.uint8, device=weight.device)
    codes[:n, :k] = naive.unpack_codes(weight.packed)
    # [r, hr, g, c, t, st, p, h] -> [r, c, g, t, st, hr, p, h]; row = 16r + 8hr + g, k = 64c + 16t + 4st + 2p + h
    frag = codes.view(np_ // 16, 2, 8, kc, 4, 4, 2, 2).permute(0, 3, 2, 4, 5, 1, 6, 7)
    words = _place_bits(frag)
    words = torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32).contiguous()
    wq = words.view(torch.uint8).reshape(np_ // 16, kc, 32, 16)
    scales = torch.zeros(np_, kc * 4, dtype=torch.uint8, device=weight.device)
    scales[:n, : k // naive.BLOCK] = weight.scale.view(torch.uint8)
    wsc = scales.view(np_ // 16, 2, 8, kc, 4).permute(0, 3, 2, 4, 1).contiguous().reshape(np_ // 16, kc, 32, 2)
    return {"wq": wq, "wsc": wsc, "alpha": tile_alpha(weight.gmul, n, np_), "N": n, "K": k, "Np": np_, "Kc": kc}


def tile_alpha(gmul: torch.Tensor, n: int, np_: int) -> torch.Tensor:
    """gmul f32 [] or [N] (per row, constant within each 16-row tile) -> alpha f32 [Np/16] = gmul * 2^62 per tile."""
    rows = gmul.float().reshape(-1).expand(n) if gmul.numel() == 1 else gmul.float().reshape(n)
    padded = torch.cat([rows, rows[-1:].expand(np_ - n)]) if np_ > n else rows
    tiles = padded.view(np_ // 16, 16)
    if not torch.equal(tiles, tiles[:, :1].expand_as(tiles)):
        raise ValueError("fused NVFP4 shards with different global scales must start at multiples of 16 rows")
    return (tiles[:, 0] * 2.0 ** 62).contiguous()


def prepared(weight: NVFP4Weight) -> dict:
    """repack(weight), computed once per weight and device."""
    key = ("repack", str(weight.device))
    if key not in weight.cache:
        weight.cache[key] = repack(weight)
    return weight.cache[key]
