"""Launcher of gemv_bc.cu (v10, "block columns"): the M = 1 GEMV whose MMA columns are the scale blocks, so the
decode skips the per-code scale multiply (layout and method: gemv_bc.cu's header). It reads the split-K kernels'
fragments (ops.prepared's wq) and its own scale words, built here from wsc once per weight and device.

Letters as ops.py: N out features, K in features, Np = N rounded up to 128, Kc = ceil(K / 64) chunks, Kp =
ceil(Kc / 2) chunk pairs.
"""
import functools
import os

import torch

from kernels import _compile
from kernels.nvfp4 import gemv_tile, ops

# gemv_bc.cu (v10, block columns) for M = 1 on Hopper. Launched with programmatic dependent launch (ops.PDL, the
# default) it is ahead of v5 / v7 / cluster on every 27B shape (NOTES.md session 6, run 2, us, back-to-back: 6144x5120
# 10.8 / 9.9, 5120x6144 12.0 / 10.2, 16384x5120 20.4 / 19.1, 5120x17408 23.0 / 20.4, 34816x5120 35.8 / 33.3), so it
# serves every M = 1 GEMV; without PDL only where it won plainly: not gemv_tile / gemv_cluster shapes, K <= BC_MAX_K
# (34816x5120 39.3 / 36.0, LM head 208.4 / 195.9). 2 chunk pairs per half-buffer below BC_U3_CHUNKS fragments.
GEMV_BC = os.environ.get("SPARKINFER_NVFP4_BC", "1") == "1"
BC_MAX_K = 5120
BC_U3_CHUNKS = 150_000
UNROLLS = (2, 3, 4)  # chunk pairs per half-buffer compiled (nvfp4_gemv_bc_u{U})
DEFAULT_UNROLL = 3
X_EXPONENT = 100  # x is staged as x * 2^100 (gemv_bc.cu X_SCALE); A = e2m1 * 2^-126
ROWS_MAX_SMEM = 100 << 10  # gemv_bcr's staged x rows at most (two blocks per SM)


def block_column_scales(wsc: torch.Tensor) -> torch.Tensor:
    """wsc u8 [Np/16, Kc, 32, 2] (ops.repack: lane 4g + t of chunk c holds the scales of rows g, g + 8 for k in
    [64c + 16t, +16)) -> wsb int32 [Np/16, Kp, 32]: lane 4g + t's word of pair p holds, in bytes 0..3, the scales
    of (row g, column 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1), column j = block j % 4 of chunk 2p + j // 4.
    An odd Kc is padded with a zero chunk."""
    r, kc = wsc.shape[:2]
    if kc % 2:
        wsc = torch.cat([wsc, torch.zeros_like(wsc[:, :1])], dim=1)
    # [r, p, parity, g, th, i1, hr] with chunk = 2p + parity, t = 2 th + i1 -> [r, p, g, (parity, th), (hr, i1)]
    v = wsc.reshape(r, -1, 2, 8, 2, 2, 2).permute(0, 1, 3, 2, 4, 6, 5)
    return v.contiguous().reshape(r, -1, 32, 4).view(torch.int32).reshape(r, -1, 32)


def prepared_bc(p: dict) -> dict:
    """p = ops.prepared(...) with "wsb" (block_column_scales) and "alpha_bc" (alpha_bc) added, once."""
    if "wsb" not in p:
        p["wsb"] = block_column_scales(p["wsc"])
    alpha_bc(p)
    return p


def alpha_bc(p: dict) -> torch.Tensor:
    """f32 [Np/16] = gmul * 2^26 per tile, the block-column kernels' output scale (codes e2m1 * 2^-126 times x *
    2^100), cached in p as "alpha_bc"."""
    if "alpha_bc" not in p:
        p["alpha_bc"] = p["alpha"] * 2.0 ** (126 - X_EXPONENT - 62)
    return p["alpha_bc"]


def applies(x: torch.Tensor, p: dict) -> bool:
    """M = 1, K % 8 == 0 (x read in 16-byte pieces), x 16-byte aligned, x staged in at most 64 KB."""
    return x.shape[0] == 1 and p["K"] % 8 == 0 and x.data_ptr() % 16 == 0 and _smem(p) <= 64 << 10


def serves(x: torch.Tensor, p: dict) -> bool:
    """ops.gemv's choice of this kernel: GEMV_BC, x of one row on a Hopper GPU (griddepcontrol, cvt from e4m3:
    sm_90), the kernel's scale words already built (prepared_bc) unless no CUDA graph is being captured (building
    them inside a capture would record the build into the graph); with ops.PDL off, only shapes that gemv_tile and
    gemv_cluster do not take and K <= BC_MAX_K."""
    if not (GEMV_BC and x.is_cuda and ops._hopper(x.device) and applies(x, p)):
        return False
    if "wsb" not in p and torch.cuda.is_current_stream_capturing():
        return False
    if ops.PDL:
        return True
    tile = ops.GEMV_VERSION == "v5" and gemv_tile.tile_applies(x, p)
    cluster = ops.GEMV_CLUSTER and ops.cluster_size(p, _compile.num_sms(x.device))
    return p["K"] <= BC_MAX_K and not tile and not cluster


def rows_smem(m: int, p: dict) -> int:
    """gemv_bcr.cu's dynamic shared memory: M x rows of Kc * 8 + 1 16-byte pieces, then 2 zero pieces."""
    return (m * (p["Kc"] * 8 + 1) + 2) * 16


def rows_applies(x: torch.Tensor, p: dict) -> bool:
    """gemv_bcr serves x: 2 <= M <= 8, K % 8 == 0, 16-byte aligned, staged rows within ROWS_MAX_SMEM."""
    m = x.shape[0]
    return 2 <= m <= 8 and p["K"] % 8 == 0 and x.data_ptr() % 16 == 0 and rows_smem(m, p) <= ROWS_MAX_SMEM


def gemv_bcr(x: torch.Tensor, p: dict, out: torch.Tensor, pdl: bool = True) -> torch.Tensor:
    """x [M, K] bf16 contiguous, 2 <= M <= 8 (|x| < 2^28), p = ops.prepared(...) -> out [M, N] bf16 (written):
    gemv_bcr.cu (block columns for a few rows: NTB = 1, 2, 4 tiles of 2 rows for M <= 2, 4, 8). Persistent grid of 2
    blocks per SM, split-K through ops' workspace; pdl as gemv_bc. Raises ValueError where rows_applies is false."""
    import numpy as np

    if not rows_applies(x, p):
        raise ValueError(f"gemv_bcr: M={x.shape[0]}, K={p['K']}: not served")
    m = x.shape[0]
    ntb = 1 if m <= 2 else 2 if m <= 4 else 4
    total = (p["Np"] // ops.ROW_GROUP) * p["Kc"]
    grid = (min(total, _compile.num_sms(x.device) * 2),)
    ws, counters = ops._workspace(x.device, p["Np"]), ops._counters(x.device, p["Np"])
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), ptr(ws), ptr(counters), ptr(alpha_bc(p)), np.int32(m),
            np.int32(p["N"]), np.int32(p["K"]), np.int32(p["Np"]), np.int32(p["Kc"]))
    kernel = _kernel(f"nvfp4_gemv_bcr_nt{ntb}", "gemv_bcr.cu")
    ops._launch("", "", grid, (256,), args, kernel, rows_smem(m, p), pdl)
    return out


def serves_rows(x: torch.Tensor, p: dict) -> bool:
    """ops.gemv's choice of gemv_bcr: only M = 2 (NTB = 1; with 2 or 4 tiles the MMAs cost more than the multiplies
    they save: NOTES.md session 6, run 9), on Hopper, K <= BC_MAX_K, not a gemv_cluster shape, GEMV_BC, and alpha_bc
    already built unless no CUDA graph is being captured. H200 run 9, us, pick / v10r: 34816x5120 39.9 / 35.8,
    LM head 208.2 / 200.0, 17408x5120 23.0 / 21.7, 5120x6144 13.0 / 11.7, 6144x5120 12.3 / 11.7."""
    if not (GEMV_BC and x.shape[0] == 2 and x.is_cuda and ops._hopper(x.device) and rows_applies(x, p)):
        return False
    if "alpha_bc" not in p and torch.cuda.is_current_stream_capturing():
        return False
    cluster = ops.GEMV_CLUSTER and ops.cluster_size(p, _compile.num_sms(x.device))
    return p["K"] <= BC_MAX_K and not cluster


def dispatch_unroll(p: dict) -> int:
    """ops.gemv's unroll: 2 chunk pairs per half-buffer below BC_U3_CHUNKS fragments, 3 from there."""
    return 2 if (p["Np"] // 16) * p["Kc"] < BC_U3_CHUNKS else 3


def _smem(p: dict) -> int:
    """Dynamic shared memory: x as [Kp * 128] bf16 and 32 zero bytes."""
    return ((p["Kc"] + 1) // 2 * 16 + 2) * 16


@functools.lru_cache(maxsize=None)
def _kernel(name: str, source: str = "gemv_bc.cu"):
    kernel = _compile.kernel(os.path.join(ops.HERE, source), name)
    kernel.max_dynamic_shared_size_bytes = ROWS_MAX_SMEM
    kernel.preferred_shared_memory_carveout = 100
    return kernel


def gemv_bc(x: torch.Tensor, p: dict, out: torch.Tensor, unroll: int = DEFAULT_UNROLL, variant: str = "",
            blocks_per_sm: int = 2, pdl: bool = True) -> torch.Tensor:
    """x [1, K] bf16 contiguous (|x| < 2^28: x * 2^100 must stay finite in bf16), p = ops.prepared(...) -> out [1, N]
    bf16 (written). Persistent grid of blocks_per_sm blocks per SM; partial row groups reduced through ops' split-K
    workspace and counters (left zero). unroll: UNROLLS; variant: bench diagnostics, wrong results ("_noflush",
    "_loadonly"; unroll 3); blocks_per_sm 3: the 3-blocks-per-SM kernel (unroll 2); pdl: programmatic dependent
    launch where ops.PDL is on and the GPU is a Hopper (ops._launch), False: a plain launch. Raises ValueError where
    `applies` is false or no such kernel is built."""
    import numpy as np

    b3 = blocks_per_sm == 3
    if (not applies(x, p) or unroll not in UNROLLS or (variant and unroll != DEFAULT_UNROLL)
            or (b3 and (unroll != 2 or variant)) or not 1 <= blocks_per_sm <= 3):
        raise ValueError(f"gemv_bc: M={x.shape[0]}, K={p['K']}, unroll {unroll}{variant}, {blocks_per_sm} blocks per "
                         "SM: not served")
    p = prepared_bc(p)
    total = (p["Np"] // ops.ROW_GROUP) * ((p["Kc"] + 1) // 2)
    grid = (min(total, _compile.num_sms(x.device) * blocks_per_sm),)
    ws, counters = ops._workspace(x.device, p["Np"]), ops._counters(x.device, p["Np"])
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsb"]), ptr(x), ptr(out), ptr(ws), ptr(counters), ptr(p["alpha_bc"]),
            np.int32(p["N"]), np.int32(p["K"]), np.int32(p["Np"]), np.int32(p["Kc"]))
    kernel = _kernel(f"nvfp4_gemv_bc_u{unroll}{variant}{'_b3' if b3 else ''}")
    ops._launch("", "", grid, (256,), args, kernel, _smem(p), pdl)
    return out
