"""Worker process: NVFP4 linear y = x W^T. CUDA: CuPy kernels (gemv.cu for M <= 32 rows, gemm.cu above); CPU: naive.

Letters: M activation rows, N out features, K in features; Np = N rounded up to 128, Kc = ceil(K / 64) chunks.
Load-time repack (cached on the NVFP4Weight, on its device): codes go from row-major [N, K/2] to per-warp MMA
fragments wq u8 [Np/16, Kc, 32 lanes, 16 B] (lane 4g+t: rows 16r+g and 16r+g+8, k in [64c+16t, +16), bits laid out
for a 1-2 op decode, see common.cuh) and scales to wsc u8 [Np/16, Kc, 32, 2] (row g, row g+8). Padding is zero.
CuPy is imported lazily, so this module imports without CuPy or a GPU.
"""
import functools
import os

import torch

from kernels import _compile
from kernels.nvfp4 import naive
from kernels.nvfp4.checkpoint import NVFP4Weight

HERE = os.path.dirname(os.path.abspath(__file__))
GEMV_MAX_M = 32
GEMM_KERNEL = "nvfp4_gemm_v2"
ROW_GROUP = 128
CHUNK = 64
WS_ROWS = 32  # workspace rows = GEMV_MAX_M
_WORKSPACE = {}


def _place_bits(frag: torch.Tensor) -> torch.Tensor:
    """frag u8 [..., hr, p, h] codes of each fragment word -> the words' bits (int64 [...]), layout of common.cuh."""
    words = torch.zeros(frag.shape[:-3], dtype=torch.int64, device=frag.device)
    for hr in range(2):
        for p in range(2):
            for h in range(2):
                c = frag[..., hr, p, h].to(torch.int64)
                sign, eem = c >> 3, c & 7
                if (hr, p) == (0, 0):
                    bits = eem << 6 | sign << 15
                elif (hr, p) == (1, 0):
                    bits = eem | sign << 9
                elif (hr, p) == (0, 1):
                    bits = eem << 3 | sign << 12
                else:
                    bits = (c & 1) << 10 | ((c >> 1) & 1) << 11 | ((c >> 2) & 1) << 13 | sign << 14
                words |= bits << (16 * h)
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


def _workspace(device, np_: int):
    """Shared f32 [32, >= Np] workspace + int32 [>= Np/128] counters, zero between kernel calls (self-cleaning)."""
    ws, counters = _WORKSPACE.get(device, (None, None))
    if ws is None or ws.shape[1] < np_:
        ws = torch.zeros(WS_ROWS, np_, dtype=torch.float32, device=device)
        counters = torch.zeros(np_ // ROW_GROUP, dtype=torch.int32, device=device)
        _WORKSPACE[device] = (ws, counters)
    return ws, counters


@functools.lru_cache(maxsize=None)
def _num_sms(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _launch(name: str, source: str, grid, block, args) -> None:
    kernel = _compile.kernel(os.path.join(HERE, source), name)
    kernel(grid, block, args, stream=_compile.external_stream(torch.cuda.current_stream().cuda_stream))


def gemv(x: torch.Tensor, p: dict, out: torch.Tensor, variant: str = "", blocks_per_sm: int = 2) -> torch.Tensor:
    """x [M, K] bf16 contiguous (M <= 32), p = prepared(...) -> out [M, N] bf16 (written).

    Persistent grid of blocks_per_sm blocks per SM (the kernels' __launch_bounds__ allow two resident);
    variant: kernel-name suffix for the bench's sweeps (e.g. "_u4")."""
    import numpy as np

    m = x.shape[0]
    nt = 1 if m <= 8 else 2 if m <= 16 else 4
    ws, counters = _workspace(x.device, p["Np"])
    total = (p["Np"] // ROW_GROUP) * p["Kc"]
    grid = (min(total, _num_sms(x.device) * blocks_per_sm),)
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), ptr(ws), ptr(counters), ptr(p["alpha"]), np.int32(m),
            np.int32(p["N"]), np.int32(p["K"]), np.int32(p["Np"]), np.int32(p["Kc"]))
    _launch(f"nvfp4_gemv_nt{nt}{variant}", "gemv.cu", grid, (256,), args)
    return out


def gemm(x: torch.Tensor, p: dict, out: torch.Tensor, kernel: str = "") -> torch.Tensor:
    """x [M, K] bf16 contiguous (any M), p = prepared(...) -> out [M, N] bf16 (written).
    kernel: "nvfp4_gemm" (v1, 2x2 warps) or "nvfp4_gemm_v2" (4x1 warps); default GEMM_KERNEL."""
    import numpy as np

    m = x.shape[0]
    grid = (p["Np"] // ROW_GROUP, -(-m // 128))
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), ptr(p["alpha"]), np.int32(m), np.int32(p["N"]),
            np.int32(p["K"]), np.int32(p["Kc"]))
    _launch(kernel or GEMM_KERNEL, "gemm.cu", grid, (128,), args)
    return out


def linear(x: torch.Tensor, weight: NVFP4Weight) -> torch.Tensor:
    """x [..., K] -> y [..., N] in x's dtype. CUDA: kernels (bf16 math, f32 accumulate); CPU: dequantize + matmul."""
    n, k = weight.shape
    if not x.is_cuda:
        key = ("dense", x.dtype)
        if key not in weight.cache:
            weight.cache[key] = weight.dequantize(x.dtype)
        return torch.nn.functional.linear(x, weight.cache[key])
    x2 = x.reshape(-1, k).to(torch.bfloat16).contiguous()
    p = prepared(weight)
    out = torch.empty(x2.shape[0], n, dtype=torch.bfloat16, device=x.device)
    if x2.shape[0] == 0:
        return out.reshape(*x.shape[:-1], n).to(x.dtype)
    (gemv if x2.shape[0] <= GEMV_MAX_M else gemm)(x2, p, out)
    return out.reshape(*x.shape[:-1], n).to(x.dtype)
