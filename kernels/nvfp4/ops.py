"""Worker process: NVFP4 linear y = x W^T. CUDA: CuPy kernels, for M <= 32 rows the GEMV gemv_pick.choice names (one
row: gemv_bt.cu or gemv_bc.cu on Hopper; gemv_bcr.cu, gemv_cluster.cu, gemv.cu with early weight loads, gemv_tile.cu,
gemv.cu), above: gemm_wgmma.cu on Hopper, gemm.cu elsewhere; the GEMVs launched with programmatic dependent launch
on Hopper (PDL); CPU: naive. The load-time repack itself: repack.py.

Letters: M activation rows, N out features, K in features; Np = N rounded up to 128, Kc = ceil(K / 64) chunks.
Load-time repack (cached on the NVFP4Weight, on its device): codes go from row-major [N, K/2] to per-warp MMA
fragments wq u8 [Np/16, Kc, 32 lanes, 16 B] (lane 4g+t: rows 16r+g and 16r+g+8, k in [64c+16t, +16), bits laid out
for a 2-4 op decode, see common.cuh) and scales to wsc u8 [Np/16, Kc, 32, 2] (row g, row g+8). Padding is zero.
CuPy is imported lazily, so this module imports without CuPy or a GPU.
"""
import functools
import os

import torch

from kernels import _compile, _pdl
from kernels.nvfp4.checkpoint import NVFP4Weight
from kernels.nvfp4.repack import CHUNK, ROW_GROUP, prepared, repack, tile_alpha  # noqa: F401 - ops.* for callers

HERE = os.path.dirname(os.path.abspath(__file__))
GEMV_MAX_M = 32
# uses_gemv: from 17 rows the wgmma GEMM (T = 32) where it serves (H200, 2026-11-30 run 8, M = 24 / 32, us GEMV / GEMM:
# 34816x5120 79.3 / 57.7, 84.7 / 59.4; LM head 475.6 / 317.4; M = 16 GEMV everywhere; kernels/nvfp4/NOTES.md session 9)
WGMMA_MIN_M = os.environ.get("SPARKINFER_NVFP4_WGMMA_MIN_M", "17")  # 33: the GEMVs up to 32 rows, as before
if not WGMMA_MIN_M.strip().isdigit():
    raise SystemExit(f"SPARKINFER_NVFP4_WGMMA_MIN_M: {WGMMA_MIN_M!r} is not a whole number of rows")
WGMMA_MIN_M = int(WGMMA_MIN_M)
GEMM_KERNEL = "nvfp4_gemm_v2"
# Hopper: M > 32 through gemm_wgmma.py (wgmma, 1.4-2.1x the mma.sync GEMM at M >= 512; NOTES.md, session 2)
GEMM_WGMMA = os.environ.get("SPARKINFER_NVFP4_WGMMA", "1") == "1"
WS_ROWS = 32  # workspace rows = GEMV_MAX_M
_WORKSPACE = {}
# GEMV for small M: "v5" = gemv_tile.cu (whole K per block, no split-K) where it applies, else "v2" = gemv.cu (split-K
# with the v7 vector-reduction flush; the *_atomic kernels keep v2's scalar red.add flush for the bench)
GEMV_VERSION = "v5"
# gemv_cluster.cu (split-K reduced in a thread-block cluster) where clusters of CLUSTER_SIZE blocks fill >=
# CLUSTER_MIN_FILL of one wave. H200 (NOTES.md, session 3): faster than gemv.cu only there: 16384x5120 (GDN in_proj,
# 256 blocks) 20.9 vs 23.1 us at M = 1, 25.9 vs 29.7 at M = 16; 14336x5120 (attention q+k+v, 224 blocks) 20.4 vs
# 21.0. Fewer blocks (e.g. 6144x5120: 4 x 48 = 192) or clusters of 3, 5, 6 (not all co-resident) lose to v7's full
# persistent wave.
GEMV_CLUSTER = os.environ.get("SPARKINFER_NVFP4_CLUSTER", "1") == "1"
CLUSTER_SIZE = 2
CLUSTER_MIN_FILL = 0.84
# gemv.cu's nvfp4_gemv_xs_* kernels (x staged per block in shared memory, twice the weight chunks in flight per warp)
# where x ([M, Kc * 64] bf16) takes at most XS_MAX_BYTES (2 blocks per SM) and each block streams at least
# XS_MIN_CHUNKS_PER_BLOCK chunks: staging x costs ~1-2 us per launch, so it pays only on long streams (H200, session
# 3: LM head 248320x5120 M = 1 207.6 vs 237.1 us, MLP gate+up 39.9 vs 40.9; 17408x5120 25.5 vs 23.8: not used there)
GEMV_XS = os.environ.get("SPARKINFER_NVFP4_XS", "1") == "1"
XS_MAX_BYTES = 64 << 10
XS_MIN_CHUNKS_PER_BLOCK = 64
BLOCK_SMEM_MAX = 232448  # sm_90: 227 KB of shared memory per block
SMEM_PER_SM = 233472  # sm_90: 228 KB of shared memory per SM, 1 KB of it reserved per resident block
# the GEMV kernels (gemv_bc, gemv_tile, gemv_cluster, gemv_v2) launched with programmatic dependent launch
# (kernels/_pdl.py): each may start while the kernel before finishes (NOTES.md session 6)
PDL = os.environ.get("SPARKINFER_NVFP4_PDL", "1") == "1"


def _scratch(kind: str, device, numel: int, dtype, zero: bool) -> torch.Tensor:
    """A per-device scratch buffer of at least `numel` elements (grown, never shrunk). Outgrown buffers stay
    referenced for the process's life: a CUDA graph captured earlier may still point at them."""
    bufs = _WORKSPACE.setdefault((kind, device), [])
    if not bufs or bufs[-1].numel() < numel:
        bufs.append((torch.zeros if zero else torch.empty)(numel, dtype=dtype, device=device))
    return bufs[-1]


def _counters(device, np_: int) -> torch.Tensor:
    """int32 [>= Np/128] row-group chunk counters, zero between calls (the finishing block re-zeroes its own)."""
    return _scratch("counters", device, np_ // ROW_GROUP, torch.int32, True)


def _workspace(device, np_: int) -> torch.Tensor:
    """f32 [32 * Np] split-K workspace, zero between calls (the finishing block re-zeroes what it read): v7 uses it as
    [Np/16 tiles, NT <= 4, 32 lanes] float4, the *_atomic kernels as [32 rows, Np]."""
    return _scratch("split_k", device, WS_ROWS * np_, torch.float32, True)


def _launch(name: str, source: str, grid, block, args, kernel=None, shared_mem: int = 0, pdl: bool = False) -> None:
    """Launch `name` of `source` (or the given cupy kernel) on torch's current stream; pdl: with programmatic
    dependent launch where PDL is on and the GPU is a Hopper (only for kernels that call pdl_wait, common.cuh)."""
    kernel = kernel or _compile.kernel(os.path.join(HERE, source), name)
    _pdl.launch_on_stream(kernel, grid, block, args, shared_mem, pdl and PDL and _hopper(_compile.current_device()))


def gemv(x: torch.Tensor, p: dict, out: torch.Tensor, variant: str = "", blocks_per_sm: int = 2) -> torch.Tensor:
    """x [M, K] bf16 contiguous (M <= 32), p = prepared(...) -> out [M, N] bf16 (written) by the kernel
    gemv_pick.choice names (gemv_bt / gemv_bc for one row, gemv_sk, gemv_btm, gemv_bcr, gemv_cluster, gemv.cu with
    early loads, gemv_tile, gemv.cu); variant, blocks_per_sm: gemv_v2's options."""
    from kernels.nvfp4 import gemv_pick

    return gemv_pick.gemv(x, p, out, variant, blocks_per_sm)


def cluster_size(p: dict, sms: int) -> int:
    """Blocks per row group for gemv_cluster (0: use gemv_v2): CLUSTER_SIZE if its (Np/128) x CLUSTER_SIZE blocks fit
    one wave of 2 blocks per SM and fill at least CLUSTER_MIN_FILL of it."""
    blocks, slots = p["Np"] // ROW_GROUP * CLUSTER_SIZE, 2 * sms
    return CLUSTER_SIZE if CLUSTER_MIN_FILL * slots <= blocks <= slots else 0


def gemv_cluster(x: torch.Tensor, p: dict, out: torch.Tensor, cs: int) -> torch.Tensor:
    """Cluster split-K GEMV (gemv_cluster.cu), x [M <= 32, K]: grid (cs, Np/128), clusters of cs blocks share a row
    group and reduce through distributed shared memory (no workspace). cs: 1..8."""
    import numpy as np

    if not 1 <= cs <= 8:
        raise ValueError(f"gemv_cluster: cluster size {cs} not in 1..8")
    m = x.shape[0]
    nt = 1 if m <= 8 else 2 if m <= 16 else 4
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), np.uint64(0), np.uint64(0), ptr(p["alpha"]), np.int32(m),
            np.int32(p["N"]), np.int32(p["K"]), np.int32(p["Np"]), np.int32(p["Kc"]))
    _launch(f"nvfp4_gemv_cl{cs}_nt{nt}", "gemv_cluster.cu", (cs, p["Np"] // ROW_GROUP), (256,), args, pdl=True)
    return out


def gemv_v2(x: torch.Tensor, p: dict, out: torch.Tensor, variant: str = "", blocks_per_sm: int = 2,
            xs: bool = None, early: bool = False) -> torch.Tensor:
    """Split-K GEMV (gemv.cu), x [M <= 32, K]: persistent grid of blocks_per_sm blocks per SM (__launch_bounds__ allow
    two resident), partial sums reduced through the self-cleaning workspace (v7: one vector reduction per 4 sums);
    variant: kernel-name suffix ("_atomic": v2's scalar reductions; others: bench diagnostics). xs: x staged in shared
    memory (the nvfp4_gemv_xs_* kernels; None: where it fits in XS_MAX_BYTES and no variant is asked for). early: the
    *_early kernels (first weight loads before griddepcontrol.wait; no variant)."""
    import numpy as np

    m = x.shape[0]
    nt = 1 if m <= 8 else 2 if m <= 16 else 4
    total = (p["Np"] // ROW_GROUP) * p["Kc"]
    grid = (min(total, _compile.num_sms(x.device) * blocks_per_sm),)
    ws, counters = _workspace(x.device, p["Np"]), _counters(x.device, p["Np"])
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), ptr(ws), ptr(counters), ptr(p["alpha"]), np.int32(m),
            np.int32(p["N"]), np.int32(p["K"]), np.int32(p["Np"]), np.int32(p["Kc"]))
    if xs is None:
        xs = GEMV_XS and not variant and xs_applies(m, p, grid[0])
    variant = "_early" if early and not variant else variant
    if xs:
        _launch("", "", grid, (256,), args, _xs_kernel(f"nvfp4_gemv_xs_nt{nt}{variant}"), m * p["Kc"] * 128, True)
    else:
        _launch(f"nvfp4_gemv_nt{nt}{variant}", "gemv.cu", grid, (256,), args, pdl=True)
    return out


def xs_applies(m: int, p: dict, blocks: int) -> bool:
    """gemv_v2's default for staging x in shared memory: M <= 16, x within XS_MAX_BYTES, and at least
    XS_MIN_CHUNKS_PER_BLOCK 64-k chunks for each of the `blocks` blocks."""
    total = (p["Np"] // ROW_GROUP) * p["Kc"]
    return m <= 16 and m * p["Kc"] * 128 <= XS_MAX_BYTES and total >= XS_MIN_CHUNKS_PER_BLOCK * blocks


@functools.lru_cache(maxsize=None)
def _xs_kernel(name: str):
    """A gemv.cu kernel that stages x in dynamic shared memory: allowed XS_MAX_BYTES of it, shared memory preferred."""
    kernel = _compile.kernel(os.path.join(HERE, "gemv.cu"), name)
    kernel.max_dynamic_shared_size_bytes = XS_MAX_BYTES
    kernel.preferred_shared_memory_carveout = 100
    return kernel


@functools.lru_cache(maxsize=None)
def _hopper(device) -> bool:
    """Compute capability 9.0: `device` a torch.device or an index (the launch path knows only torch's current
    device index)."""
    return torch.cuda.get_device_capability(device) == (9, 0)



def wgmma_serves(device) -> bool:
    """Whether gemm() runs the wgmma kernel on `device`: GEMM_WGMMA on and a Hopper GPU (gemm_wgmma.cu is built for
    sm_90a, compute capability 9.0 only)."""
    return GEMM_WGMMA and torch.device(device).type == "cuda" and _hopper(torch.device(device))


def gemm(x: torch.Tensor, p: dict, out: torch.Tensor, kernel: str = "") -> torch.Tensor:
    """x [M, K] bf16 contiguous (any M), p = prepared(...) -> out [M, N] bf16 (written). On Hopper (GEMM_WGMMA)
    the wgmma kernel (gemm_wgmma.py), else / where it refuses the shape: kernel "nvfp4_gemm" (v1, 2x2 warps) or
    "nvfp4_gemm_v2" (4x1 warps; default GEMM_KERNEL). Naming a kernel skips the wgmma one."""
    import numpy as np

    if not kernel and wgmma_serves(x.device):
        from kernels.nvfp4 import gemm_wgmma

        try:
            return gemm_wgmma.gemm_wgmma(x, p, out)
        except ValueError:
            pass
    m = x.shape[0]
    grid = (p["Np"] // ROW_GROUP, -(-m // 128))
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), ptr(p["alpha"]), np.int32(m), np.int32(p["N"]),
            np.int32(p["K"]), np.int32(p["Kc"]))
    _launch(kernel or GEMM_KERNEL, "gemm.cu", grid, (128,), args)
    return out


def linear(x: torch.Tensor, weight: NVFP4Weight, out: torch.Tensor = None) -> torch.Tensor:
    """x [..., K] -> y [..., N] in x's dtype. CUDA: kernels (bf16 math, f32 accumulate); CPU: dequantize + matmul.
    out: [M = x.numel() / K, N] contiguous in x's dtype to write y into (a CUDA graph's static buffer), else ValueError."""
    n, k = weight.shape
    if out is not None and (tuple(out.shape) != (x.numel() // k, n) or out.dtype != x.dtype
                            or not out.is_contiguous() or out.device != x.device):
        raise ValueError(f"nvfp4 linear: out must be [{x.numel() // k}, {n}] {x.dtype} contiguous on {x.device}")
    if not x.is_cuda:
        key = ("dense", x.dtype)
        if key not in weight.cache:
            weight.cache[key] = weight.dequantize(x.dtype)
        y = torch.nn.functional.linear(x, weight.cache[key])
        return y if out is None else out.copy_(y.reshape(out.shape)).view(y.shape)
    x2 = x.reshape(-1, k).to(torch.bfloat16).contiguous()
    if x2.data_ptr() % 16:  # the kernels read x in 16-byte pieces
        x2 = x2.clone()
    p = prepared(weight)
    y = out if out is not None and out.dtype == torch.bfloat16 else x2.new_empty(x2.shape[0], n)
    if x2.shape[0]:
        _linear_kernel(x2, p)(x2, p, y)
    if out is not None and y is not out:
        y = out.copy_(y)
    return y.reshape(*x.shape[:-1], n).to(x.dtype)


def _linear_kernel(x: torch.Tensor, p: dict):
    """linear()'s launcher (x, p, out) for x's rows: ops.gemv up to uses_gemv's bound, gemv_sk (v13) itself for the rows
    past it that it serves (17-32, where it beats the wgmma GEMM; ops.gemv would check them again), else the GEMM."""
    m = x.shape[0]
    if uses_gemv(m, wgmma_serves(x.device)):
        return gemv
    from kernels.nvfp4 import gemv_sk

    return gemv_sk.gemv_sk if m <= gemv_sk.MAX_M and gemv_sk.serves(x, p) else gemm


def uses_gemv(m: int, wgmma: bool) -> bool:
    """linear()'s choice for m rows: the GEMVs up to GEMV_MAX_M rows, or below WGMMA_MIN_M rows where the wgmma GEMM
    serves (wgmma); the same on every measured weight shape."""
    return m < WGMMA_MIN_M if wgmma else m <= GEMV_MAX_M
