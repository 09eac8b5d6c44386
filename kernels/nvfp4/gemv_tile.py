"""Launcher of gemv_tile.cu (v5, M <= 16: one wave of blocks, each owning whole 16-row tiles over the full K, no
cross-block reduction; x staged per block, a ring of weight stages per warp). gemv_pick runs it where ops.GEMV_VERSION
is "v5" and tile_applies (M <= 8 on weights of up to ~19 MB). Method and H200 figures: NOTES.md, v5 and v7.
"""
import functools
import os

import torch

from kernels import _compile
from kernels.nvfp4 import ops

TILE_MAX_M = 16  # gemv_tile runs M <= 16: NT = 1 n8 tile of x rows for M <= 8, 2 for M <= 16
# ops.gemv picks gemv_tile only where run 4 (NOTES.md, v5) measured it ahead of v2: M <= 8 (NT = 2 lost on every
# shape), every tile its own block (a block owning more tiles than others is a tail) and weights of at most
# TILE_DISPATCH_CHUNKS fragments (~19 MB; above, v2's leaner inner loop wins: both are issue-bound there)
TILE_DISPATCH_M = 8
TILE_DISPATCH_CHUNKS = 32768
TILE_X_BYTES = 48 << 10  # M <= 8: x staged per block above this would fit too few blocks per SM
TILE_DEPTHS = {1: (6, 10), 2: (8,)}  # ring stages per warp compiled per NT (the first is the default)
TILE_WARPS, TILE_STAGE_BYTES = 8, 640


def _tile_smem(m: int, p: dict, depth: int) -> int:
    """Dynamic shared memory of gemv_tile: x rows padded by 16 B, then the warps' rings."""
    return m * (p["Kc"] * 64 + 8) * 2 + TILE_WARPS * depth * TILE_STAGE_BYTES


def _tile_static(nt: int) -> int:
    """Static shared memory of gemv_tile: the e4m3 LUT and red[2][8 warps][NT][32] float4."""
    return 1024 + 8192 * nt


def tile_fits(m: int, p: dict, depth: int) -> bool:
    """Whether gemv_tile serves m rows (at most TILE_MAX_M) with params p and ring `depth`: its dynamic and static
    shared memory fit one block's limit (ops.BLOCK_SMEM_MAX)."""
    nt = 1 if m <= 8 else 2
    return m <= TILE_MAX_M and _tile_smem(m, p, depth) + _tile_static(nt) <= ops.BLOCK_SMEM_MAX


def _tile_slots(m: int, p: dict, depth: int, sms: int) -> int:
    """gemv_tile blocks resident at once: shared memory per SM, capped by registers (4 blocks at NT = 1, 2 at 2)."""
    nt = 1 if m <= 8 else 2
    per_sm = ops.SMEM_PER_SM // (_tile_smem(m, p, depth) + _tile_static(nt) + 1024)
    return sms * max(1, min(4 if nt == 1 else 2, per_sm))


def tile_applies(x: torch.Tensor, p: dict) -> bool:
    """ops.gemv's choice of gemv_tile (see TILE_DISPATCH_*): M <= 8, K % 8 == 0 (16-byte x pieces), x 16-byte
    aligned, x at most TILE_X_BYTES, one tile per block in one wave, weights of at most TILE_DISPATCH_CHUNKS."""
    m, ntiles = x.shape[0], p["Np"] // 16
    if m > TILE_DISPATCH_M or p["K"] % 8 or x.data_ptr() % 16 or ntiles * p["Kc"] > TILE_DISPATCH_CHUNKS:
        return False
    sms = _compile.num_sms(x.device) if x.is_cuda else 132
    return _tile_smem(m, p, 0) <= TILE_X_BYTES and ntiles <= _tile_slots(m, p, TILE_DEPTHS[1][0], sms)


@functools.lru_cache(maxsize=None)
def _tile_kernel(name: str, nt: int):
    """A gemv_tile kernel, allowed the most dynamic shared memory a block can have."""
    kernel = _compile.kernel(os.path.join(ops.HERE, "gemv_tile.cu"), name)
    kernel.max_dynamic_shared_size_bytes = ops.BLOCK_SMEM_MAX - _tile_static(nt)
    kernel.preferred_shared_memory_carveout = 100  # all of L1 as shared memory: 4 blocks per SM need ~200 KB
    return kernel


def gemv_tile(x: torch.Tensor, p: dict, out: torch.Tensor, depth: int = 0, suffix: str = "",
              balanced: bool = False) -> torch.Tensor:
    """v5 GEMV (gemv_tile.cu), x [M <= 16, K] bf16 -> out [M, N]: one wave of blocks, each owning whole 16-row tiles
    over the full K (no cross-block reduction). depth: ring stages per warp (TILE_DEPTHS, 0: default);
    suffix "_loadonly" (M <= 8, depth 6): timing diagnostic without decode/MMA (wrong results); balanced: as few
    blocks as give every block the same number of tiles (+-1 only when that does not divide), instead of a full wave
    (NOTES.md, v7)."""
    import numpy as np

    m, ntiles = x.shape[0], p["Np"] // 16
    nt = 1 if m <= 8 else 2
    depth = depth or TILE_DEPTHS.get(nt, (0,))[0]
    if m > TILE_MAX_M or depth not in TILE_DEPTHS[nt] or not tile_fits(m, p, depth):
        raise ValueError(f"gemv_tile: M={m}, depth {depth}: no such kernel or x too large for shared memory")
    smem = _tile_smem(m, p, depth)
    slots = _tile_slots(m, p, depth, _compile.num_sms(x.device))
    grid = (-(-ntiles // -(-ntiles // slots)) if balanced else min(ntiles, slots),)
    kernel = _tile_kernel(f"nvfp4_gemv_tile{'_nt2' if nt == 2 else ''}_d{depth}{suffix}", nt)
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), ptr(p["alpha"]), np.int32(m), np.int32(p["N"]),
            np.int32(p["K"]), np.int32(p["Kc"]), np.int32(ntiles))
    ops._launch("", "", grid, (256,), args, kernel, smem, pdl=True)
    return out
