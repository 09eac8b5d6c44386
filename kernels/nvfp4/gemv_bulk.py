"""Launcher of gemv_bulk.cu (v8): the split-K GEMV for M = 1..16 with the weight stream fed by bulk copies
(cp.async.bulk, sm_90) into a per-warp shared-memory ring of `depth` stages (BULK_C = 4 chunks of 64 k each: 2304 B).
Bench and diagnostics only: ops.gemv does not dispatch it (slower on every shape, NOTES.md session 5).

Letters as ops.py: M rows of x, N out features, K in features, Np = N rounded up to 128, Kc = ceil(K / 64).
"""
import functools
import os

import torch

from kernels import _compile
from kernels.nvfp4 import ops

STAGE_BYTES = 4 * 576  # BULK_C chunks of 512 B fragments + 64 B scale pairs
MAX_DEPTH = 8  # BULK_MAX_DEPTH: mbarriers per warp
WARPS = 8
STATIC_SMEM = 2048  # e4m3 LUT 1 KB, mbarriers 512 B, s_last (ptxas: 1664 B), rounded up
MAX_M = 16
# x staged in shared memory (the _xs kernel, M = 1 only) where it takes at most this many bytes
XS_MAX_BYTES = 16 << 10
SLOT_SENTINEL = 0x7FBADBAD  # gemv_bulk.cu: an empty slot (a NaN that no arithmetic produces)
_SLOTS = {}


def _slots(device, vblocks: int) -> torch.Tensor:
    """The slot array of the partial row groups ([vblocks][8 warps][NT <= 2][32 lanes] float4 = 2048 floats per
    virtual block), every entry SLOT_SENTINEL between calls (each call puts back what it reads). Grown, never shrunk;
    outgrown arrays stay referenced (a captured CUDA graph may point at them)."""
    bufs = _SLOTS.setdefault(device, [])
    if not bufs or bufs[-1].numel() < vblocks * 2048:
        bufs.append(torch.full((vblocks * 2048,), SLOT_SENTINEL, dtype=torch.int32, device=device))
    return bufs[-1]


def _block_budget(blocks_per_sm: int = 2) -> int:
    """Dynamic shared memory one of `blocks_per_sm` resident blocks may take (sm_90: 228 KB per SM, 1 KB per block
    kept)."""
    return ops.SMEM_PER_SM // blocks_per_sm - 1024 - STATIC_SMEM


def x_bytes(m: int, p: dict) -> int:
    """Shared memory of x staged as [M, Kc * 64] bf16."""
    return m * p["Kc"] * 128


def default_depth(xs_bytes: int, blocks_per_sm: int = 2) -> int:
    """Ring stages per warp that fit `blocks_per_sm` blocks per SM beside `xs_bytes` of staged x (at most
    MAX_DEPTH)."""
    return max(0, min(MAX_DEPTH, (_block_budget(blocks_per_sm) - xs_bytes) // (WARPS * STAGE_BYTES)))


@functools.lru_cache(maxsize=None)
def _kernel(name: str):
    kernel = _compile.kernel(os.path.join(ops.HERE, "gemv_bulk.cu"), name)
    kernel.max_dynamic_shared_size_bytes = ops.BLOCK_SMEM_MAX - STATIC_SMEM
    kernel.preferred_shared_memory_carveout = 100
    return kernel


def gemv_bulk(x: torch.Tensor, p: dict, out: torch.Tensor, xs: bool = None, depth: int = 0,
              variant: str = "", blocks_per_sm: int = 2, warps: int = 8) -> torch.Tensor:
    """x [M <= 16, K] bf16 contiguous, 16-byte aligned, K % 8 == 0; p = ops.prepared(...) -> out [M, N] bf16 (written).
    xs: stage x in shared memory (M = 1 only; None: where x takes at most XS_MAX_BYTES); depth: ring stages per warp
    (0: as many as fit blocks_per_sm blocks per SM); variant: bench diagnostics, wrong results ("_loadonly": M = 1, no
    xs; "_noflush", "_nomma": M = 1, xs); blocks_per_sm 3: the _b3 kernel (M = 1, xs; fewer registers); warps 16: one
    CTA of 16 warps per SM (two 8-warp blocks' work in one CTA: the _w16 kernels; blocks_per_sm is then 1).
    Raises ValueError for M > 16, depth outside 1..MAX_DEPTH or a ring that does not fit a block."""
    import numpy as np

    m = x.shape[0]
    if xs is None:
        xs = m == 1 and not variant and x_bytes(m, p) <= XS_MAX_BYTES
    xs_bytes = x_bytes(m, p) if xs else 0
    if warps == 16:
        blocks_per_sm = 1
    depth = depth or min(MAX_DEPTH, (_block_budget(blocks_per_sm) - xs_bytes) // (warps * STAGE_BYTES))
    smem = warps * depth * STAGE_BYTES + xs_bytes
    if m > MAX_M or (xs and m != 1) or not 1 <= depth <= MAX_DEPTH or smem + STATIC_SMEM > ops.BLOCK_SMEM_MAX:
        raise ValueError(f"gemv_bulk: M={m}, xs={xs}, depth={depth}: no such kernel or the ring does not fit")
    nt = 1 if m <= 8 else 2
    name = f"nvfp4_gemv_bulk{'_xs' if xs else ''}_nt{nt}{variant}{'_b3' if blocks_per_sm == 3 else ''}"
    name += "_w16" if warps == 16 else ""
    total = (p["Np"] // ops.ROW_GROUP) * p["Kc"]
    grid = (min(total, _compile.num_sms(x.device) * blocks_per_sm),)
    ws = _slots(x.device, grid[0] * warps // 8)  # the kernel's counters argument is unused (0)
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), ptr(ws), np.uint64(0), ptr(p["alpha"]), np.int32(m),
            np.int32(p["N"]), np.int32(p["K"]), np.int32(p["Np"]), np.int32(p["Kc"]), np.int32(depth))
    ops._launch("", "", grid, (32 * warps,), args, _kernel(name), min(smem, ops.BLOCK_SMEM_MAX - STATIC_SMEM))
    return out
