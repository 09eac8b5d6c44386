"""Launcher of gemv_stream.cu (v9): the GEMV for M = 1..16 with one block per SM (16 compute warps fed by bulk copies
from a shared-memory stage queue, 1 flush warp), boundary tiles first so no reduction sits at the end (NOTES.md,
session 5).

Letters as ops.py: M rows of x, N out features, K in features, Np = N rounded up to 128, Kc = ceil(K / 64).
"""
import functools
import os

import torch

from kernels import _compile
from kernels.nvfp4 import ops

STAGE_BYTES = 4 * 576  # BULK_C chunks of 512 B fragments + 64 B scale pairs
WARPS = 16  # compute warps; one more flushes
MAX_DEPTH = 6
ACC_BYTES = 16 * 16 * 16 * 4  # SLOTS tile accumulators of [16 m][16 rows] f32
STATIC_SMEM = 3072  # the Shared struct (ptxas: 2432 B), rounded up
MAX_M = 16
XS_MAX_BYTES = 40 << 10  # M = 1: x staged in shared memory up to this size


def x_bytes(m: int, p: dict) -> int:
    return m * p["Kc"] * 128


def default_depth(xs_bytes: int) -> int:
    """Ring stages per warp that fit one block per SM beside x and the accumulators (at most MAX_DEPTH)."""
    free = ops.BLOCK_SMEM_MAX - STATIC_SMEM - ACC_BYTES - xs_bytes
    return max(0, min(MAX_DEPTH, free // (WARPS * STAGE_BYTES)))


@functools.lru_cache(maxsize=None)
def _kernel(name: str):
    kernel = _compile.kernel(os.path.join(ops.HERE, "gemv_stream.cu"), name)
    kernel.max_dynamic_shared_size_bytes = ops.BLOCK_SMEM_MAX - STATIC_SMEM
    kernel.preferred_shared_memory_carveout = 100
    return kernel


def gemv_stream(x: torch.Tensor, p: dict, out: torch.Tensor, xs: bool = None, depth: int = 0) -> torch.Tensor:
    """x [M <= 16, K] bf16 contiguous, 16-byte aligned, K % 8 == 0; p = ops.prepared(...) -> out [M, N] bf16 (written).
    xs: stage x in shared memory (M = 1 only; None: where it takes at most XS_MAX_BYTES); depth: ring stages per warp
    (0: as many as fit). Raises ValueError for M > 16, xs with M > 1, or a depth that does not fit."""
    import numpy as np

    m = x.shape[0]
    if xs is None:
        xs = m == 1 and x_bytes(m, p) <= XS_MAX_BYTES
    xs_bytes = x_bytes(m, p) if xs else 0
    depth = depth or default_depth(xs_bytes)
    smem = WARPS * depth * STAGE_BYTES + xs_bytes + ACC_BYTES
    if m > MAX_M or (xs and m != 1) or not 1 <= depth <= MAX_DEPTH or smem + STATIC_SMEM > ops.BLOCK_SMEM_MAX:
        raise ValueError(f"gemv_stream: M={m}, xs={xs}, depth={depth}: no such kernel or it does not fit")
    nt = 1 if m <= 8 else 2
    total = (p["Np"] // 16) * p["Kc"]
    grid = (min(total, _compile.num_sms(x.device)),)
    ws = ops._workspace(x.device, p["Np"])  # [Np/16][16][16] f32 here: 16 Np <= its 32 Np floats
    counters = ops._scratch("tile_counters", x.device, p["Np"] // 16, torch.int32, True)
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), ptr(ws), ptr(counters), ptr(p["alpha"]), np.int32(m),
            np.int32(p["N"]), np.int32(p["K"]), np.int32(p["Np"]), np.int32(p["Kc"]), np.int32(depth))
    ops._launch("", "", grid, ((WARPS + 1) * 32,), args, _kernel(f"nvfp4_gemv_stream{'_xs' if xs else ''}_nt{nt}"), smem)
    return out
