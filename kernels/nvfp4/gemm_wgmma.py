"""Worker process (GPU path): NVFP4 GEMM on Hopper tensor cores (gemm_wgmma.cu, wgmma, sm_90a) for prefill-sized M.

gemm_wgmma(x [M, K] bf16, p = ops.prepared(weight), out [M, N] bf16) -> out = x W^T, on torch's current stream
(two launches: nvfp4_permute_x puts x into the weights' k order, then the GEMM; PERMUTE_X = False: one launch).
Letters as in ops.py: Np = N rounded up to 128, Kc = ceil(K / 64). Block tile: 128 weight rows x T tokens, T = 32,
64, 128 or 256 (one kernel each), and S split-K blocks per tile over Kc / S chunks each (the _sk kernels; S = 1: the
plain ones), (T, S) picked by wgmma_pick.pick unless given. Split-K sums in an f32 workspace + per-tile counters kept zero
between calls (_scratch: one per device, grown only, never freed, so CUDA graphs keep valid pointers; calls on two
streams at once would share it). wgmma needs the sm_90a target, which CuPy's
RawModule cannot ask for (it appends its own -arch=sm_90), so this module compiles with NVRTC directly and loads
the cubin through cupy.RawModule(path=...). CuPy is imported lazily: the module imports on a CPU-only machine.
"""
import functools
import hashlib
import os
import tempfile

from kernels import _compile
# the tile table and pick's cost model live in wgmma_pick.py; the names below are also this module's for its callers
from kernels.nvfp4.wgmma_pick import MIN_SPLIT_CHUNKS, SPLITS  # noqa: F401
from kernels.nvfp4.wgmma_pick import RING_VARIANTS, TILE_ROWS, TILES, best_splits, pick, pick_tile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = "gemm_wgmma.cu"
# what SOURCE includes: part of the cubin cache key
HEADERS = ("wgmma_ptx.cuh", "common.cuh", "gemm_out.cuh", "gemm_stream_k.cuh", "gemm_ws.cuh", "gemm_ws_sk.cuh",
           "gemm_wsb.cuh", "bulk_ptx.cuh")
THREADS = 256
GROUP_BYTES = 16 << 20  # weights of one raster group of row tiles (kept in L2 while the group sweeps the tokens)
FRAGMENT_BYTES = 576  # one 16-row x 64-k tile: 512 B of codes + 64 B of scales
NVRTC_OPTIONS = ("-arch=sm_90a", "--std=c++17")
# x pre-permuted into the repacked k order (one extra pass over x) so the GEMM copies it in 16-byte pieces, instead of
# 4-byte cp.async of x as is (run 1: ~8 clocks per 128-byte x row per chunk, the kernel's largest cost). Run 2: the
# permuted path is 1.2-1.5x faster at M >= 2048 (permute launch included: 2.5 us at M = 128 to 43-137 us at 8192)
PERMUTE_X = True


def stage_bytes(tile: int) -> int:
    """One pipeline stage: x tile (T rows x 128 B) + 8 weight fragments (4 KB) + scales (512 B), 1 KB aligned."""
    return tile * 128 + 5120


def smem_bytes(tile: int, ring: str = "") -> int:
    """Dynamic shared memory of the T kernel (or its RING_VARIANTS ring): its stages plus 1 KB of alignment slack
    (swizzle atoms)."""
    stages = RING_VARIANTS[ring][1] if ring in RING_VARIANTS else TILES[tile][0]
    return stages * stage_bytes(tile) + 1024


def weight_args(p: dict) -> tuple:
    """The launch arguments the GEMM kernels take from the weight p, as CuPy takes them: (wq, wsc, alpha) pointers
    and N, K, Kc, row tiles, raster_group(p); built once and kept in p (the host's cost a launch: session 18)."""
    import numpy as np

    if "_gemm_args" not in p:
        ptrs = tuple(np.uint64(p[key].data_ptr()) for key in ("wq", "wsc", "alpha"))
        p["_gemm_args"] = ptrs + tuple(np.int32(v) for v in (p["N"], p["K"], p["Kc"], p["Np"] // TILE_ROWS,
                                                              raster_group(p)))
    return p["_gemm_args"]


def raster_group(p: dict) -> int:
    """Row tiles per raster group: as many as keep GROUP_BYTES of weights, at least 1, at most all."""
    per_row_tile = (TILE_ROWS // 16) * p["Kc"] * FRAGMENT_BYTES
    return max(1, min(p["Np"] // TILE_ROWS, GROUP_BYTES // per_row_tile))


@functools.lru_cache(maxsize=None)
def _module():
    """cupy.RawModule of gemm_wgmma.cu compiled by NVRTC for sm_90a, once per machine: the cubin is kept in the temp
    folder under a hash of the sources and options (a bench after the tests skips the ~10 s compile)."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    path = os.path.join(HERE, SOURCE)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    headers = []
    for name in HEADERS:
        with open(os.path.join(HERE, name), encoding="utf-8") as f:
            headers.append(f.read())
    key = hashlib.sha256("\0".join((source, *headers) + NVRTC_OPTIONS).encode()).hexdigest()[:16]
    cubin_path = os.path.join(tempfile.gettempdir(), f"nvfp4_wgmma_{key}.cubin")
    if os.path.exists(cubin_path):
        return cupy.RawModule(path=cubin_path)
    prog = nvrtc.createProgram(source, SOURCE, (), ())
    try:
        try:
            nvrtc.compileProgram(prog, NVRTC_OPTIONS + ("-I" + HERE,))
        except nvrtc.NVRTCError as e:
            raise RuntimeError(f"NVRTC failed on {SOURCE}:\n{nvrtc.getProgramLog(prog)}") from e
        cubin = nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    fd, tmp = tempfile.mkstemp(prefix="nvfp4_wgmma_", suffix=".part")
    with os.fdopen(fd, "wb") as f:
        f.write(cubin)
    os.replace(tmp, cubin_path)  # atomic: a concurrent process sees the whole cubin or none
    return cupy.RawModule(path=cubin_path)


@functools.lru_cache(maxsize=None)
def _function(name: str):
    return _module().get_function(name)


@functools.lru_cache(maxsize=None)
def kernel(name: str, tile: int, ring: str = ""):
    """A GEMM kernel of tile T, allowed its dynamic shared memory."""
    kernel = _function(name)
    kernel.max_dynamic_shared_size_bytes = smem_bytes(tile, ring)
    kernel.preferred_shared_memory_carveout = 100
    return kernel


def check_args(x, p: dict, out, tile: int, fence: bool, permute: bool, diag: str, splits: int) -> bool:
    """gemm_wgmma's argument checks (ValueError for what the kernels do not take; no GPU call). -> whether the call
    is to the default kernel family (x permuted, fenced, no diagnostic), the only one with split-K and stream-K."""
    import torch

    m, n, k = (x.shape[0] if x.dim() == 2 else -1), p["N"], p["K"]
    if x.dim() != 2 or x.shape[1] != k or x.dtype != torch.bfloat16 or not x.is_contiguous() or m < 1:
        raise ValueError(f"gemm_wgmma: x must be [M >= 1, {k}] bf16 contiguous, got {tuple(x.shape)} {x.dtype}")
    if k % 2 or x.data_ptr() % 4:  # x moves in 4-byte (k pair) pieces
        raise ValueError("gemm_wgmma: K must be even and x 4-byte aligned")
    if tuple(out.shape) != (m, n) or out.dtype != torch.bfloat16 or not out.is_contiguous():
        raise ValueError(f"gemm_wgmma: out must be [{m}, {n}] bf16 contiguous")
    if tile and tile not in TILES:
        raise ValueError(f"gemm_wgmma: tile must be one of {sorted(TILES)}")
    if not fence and not permute:
        raise ValueError("gemm_wgmma: the no-fence kernels take the permuted x only")
    if diag in RING_VARIANTS and tile != RING_VARIANTS[diag][0]:
        raise ValueError(f"gemm_wgmma: ring {diag} is built for T = {RING_VARIANTS[diag][0]}")
    plain = fence and permute and (not diag or diag in RING_VARIANTS)
    if splits < 0 or splits > p["Kc"] or (splits > 1 and not plain):
        raise ValueError(f"gemm_wgmma: splits must be 0 .. Kc = {p['Kc']}, and 1 or 0 for the _x4, _nf and diag "
                         "kernels")
    return plain


def _stream_k_ran(x, p: dict, out, choice: tuple, plain: bool, num_sms: int) -> bool:
    """gemm_wgmma's stream-K launch: choice = its (tile, splits, stream_k) arguments; stream_k -1 takes
    streamk.choice's tile and waves where tile and splits are 0 and the family is the default one (plain). True
    where the stream-K kernel ran; raises ValueError where stream-K was asked for with what it does not take."""
    from kernels.nvfp4 import streamk  # imports this module: no cycle at import time

    tile, splits, stream_k = choice
    if stream_k < 0 and plain and not tile and not splits:
        tile, stream_k = streamk.choice(x.shape[0], p["Np"], p["K"], num_sms)
    if stream_k < 0:
        return False
    if not plain or splits > 1 or tile not in (0, 128, 256):
        raise ValueError("gemm_wgmma: stream-K takes T = 128 or 256, permuted, fenced, no split-K")
    return streamk.launch(x, p, out, tile or 256, stream_k, num_sms)


def gemm_wgmma(x, p: dict, out, tile: int = 0, fence: bool = True, permute: bool = PERMUTE_X,
               diag: str = "", splits: int = 0, stream_k: int = -1, use_ws: bool = True):
    """x [M, K] bf16 contiguous, p = ops.prepared(weight) -> out [M, N] bf16 (written). tile: T (64, 128, 256;
    0: pick's); splits: S split-K blocks per output tile, at most Kc (1: none, the plain kernels; 0: pick's, or the
    cheapest for a given tile; S > 1 only for the default family: permuted, fenced, no diag; S = 1 where the
    workspace would have to grow during a CUDA graph capture: warm up first); permute: first copy x into the
    repacked k order (nvfp4_permute_x, xp [M, Kc * 64] bf16, one read + one write of x) so the GEMM moves x in
    16-byte pieces, else the _x4 kernels copy 4-byte k pairs of x as is; fence: False runs the _nf kernels (permute
    only: no proxy fence between cp.async data and wgmma, bench A/B).
    diag: "_nox" / "_nodec" (T = 256, permute; T = 32 too), "_nomma" / "_copies" (T = 32; "_copies" with fence
    False too): bench timing diagnostics, wrong results (no x copies / no decode / no wgmma / the copies alone:
    kernels/nvfp4/NOTES.md session 18); "_s6" (T = 64): RING_VARIANTS' ring (bench A/B, correct results, split-K too).
    stream_k >= 0: the stream-K kernel (T = 128 or 256, default 256; permuted, fenced) with that many waves of
    whole tiles first (see gemm_wgmma.cu gemm_stream_k); -1: streamk.choice's when tile and splits are 0 and
    the kernel family is the default one, else not used. use_ws: T = 64 / 128 default-family launches go to the
    warp-specialised kernels (gemm_ws.py) where gemm_ws.WS_GEMM is on; False keeps this module's.
    Raises ValueError for what the kernel does not take (the caller falls back to ops.gemm)."""
    import numpy as np

    plain = check_args(x, p, out, tile, fence, permute, diag, splits)
    m, n = x.shape[0], p["N"]
    num_sms = _compile.num_sms(x.device)
    if _stream_k_ran(x, p, out, (tile, splits, stream_k), plain, num_sms):
        return out
    from kernels.nvfp4 import gemm_ws  # imports this module: no cycle at import time

    ws_family = plain and not diag and use_ws  # the warp-specialised kernels may take the launch
    bulk = ws_family and not tile and not splits and gemm_ws.bulk_choice(m, p["Np"], p["Kc"], num_sms)
    if bulk:
        return gemm_ws.launch_bulk(x, p, out, 1, *bulk)
    tile, splits = _tile_and_splits(m, p, tile, splits, plain, num_sms)
    if ws_family and tile in (64, 128) and gemm_ws.WS_GEMM:
        return gemm_ws.launch(x, p, out, splits, tile)
    rows = p["Np"] // TILE_ROWS
    tiles = rows * -(-m // tile)
    ws, counters, splits = split_buffers(x.device, tiles, tile, splits)
    vec_out = int(n % 8 == 0 and out.data_ptr() % 16 == 0)
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    stream = _compile.current_stream()
    src = permuted_x(x, p, stream) if permute else x
    w = weight_args(p)
    args = (w[0], w[1], ptr(src), ptr(out), w[2], np.int32(m), *w[3:], np.int32(vec_out),
            np.uint64(0) if splits == 1 else ptr(ws), np.uint64(0) if splits == 1 else ptr(counters),
            np.int32(splits))
    name = f"nvfp4_gemm_wgmma_t{tile}{'' if permute else '_x4'}{'' if fence else '_nf'}{diag}"
    name += "_sk" if splits > 1 else ""
    kernel(name, tile, diag)((tiles * splits,), (THREADS,), args, shared_mem=smem_bytes(tile, diag), stream=stream)
    return out


def split_buffers(device, tiles: int, tile: int, splits: int) -> tuple:
    """-> (ws, counters, S): the split-K workspace and tile counters (the shared zeroed scratch) for S blocks per
    output tile over `tiles` tiles of T tokens, or (None, None, 1) for S = 1 and where the scratch would have to grow
    during a CUDA graph capture. Raises ValueError past 2^31 blocks."""
    import torch

    if tiles * splits >= 1 << 31:
        raise ValueError("gemm_wgmma: too many blocks")
    if splits > 1:
        ws = scratch("split_k", device, tiles * tile * TILE_ROWS, torch.float32)
        counters = scratch("counters", device, tiles, torch.int32)
        if ws is not None and counters is not None:
            return ws, counters, splits
    return None, None, 1


def _tile_and_splits(m: int, p: dict, tile: int, splits: int, plain: bool, num_sms: int) -> tuple:
    """(T, S) of a whole-tile / split-K launch: the given ones, else pick's (split-K only for the default family)."""
    if not splits and plain:
        if tile:
            splits = best_splits(tile, m, p["Np"], p["Kc"], num_sms)
        else:
            tile, splits = pick(m, p["Np"], p["Kc"], num_sms)
    return tile or pick_tile(m, p["Np"], num_sms), splits or 1


def permuted_x(x, p: dict, stream):
    """nvfp4_permute_x: x [M, K] -> xp [M, Kc * 64] bf16 in the repacked k order (a new tensor)."""
    import numpy as np
    import torch

    m, kc = x.shape[0], p["Kc"]
    xp = torch.empty(m, kc * 64, dtype=torch.bfloat16, device=x.device)
    _function("nvfp4_permute_x")((-(-m * kc * 8 // 256),), (256,), (
        np.uint64(x.data_ptr()), np.uint64(xp.data_ptr()), np.int32(m), np.int32(p["K"]), np.int32(kc)), stream=stream)
    return xp


# (kind, device) -> buffers, newest (largest) last; outgrown ones stay referenced for the process's life because a
# CUDA graph captured earlier may still point at them
_SCRATCH = {}


def scratch(kind: str, device, numel: int, dtype):
    """A zeroed per-device buffer of at least `numel` elements (the split-K workspace / tile counters: the kernels
    leave them zero), grown, never shrunk or freed; None where it would have to grow during a CUDA graph capture."""
    import torch

    bufs = _SCRATCH.setdefault((kind, torch.device(device)), [])
    if not bufs or bufs[-1].numel() < numel:
        if torch.cuda.is_current_stream_capturing():
            return None
        bufs.append(torch.zeros(max(numel, 2 * bufs[-1].numel() if bufs else 0), dtype=dtype, device=device))
    return bufs[-1]
