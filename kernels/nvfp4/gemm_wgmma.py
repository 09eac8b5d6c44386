"""Worker process (GPU path): NVFP4 GEMM on Hopper tensor cores (gemm_wgmma.cu, wgmma, sm_90a) for prefill-sized M.

gemm_wgmma(x [M, K] bf16, p = ops.prepared(weight), out [M, N] bf16) -> out = x W^T, on torch's current stream
(two launches: nvfp4_permute_x puts x into the weights' k order, then the GEMM; PERMUTE_X = False: one launch).
Letters as in ops.py: Np = N rounded up to 128, Kc = ceil(K / 64). Block tile: 128 weight rows x T tokens, T = 64,
128 or 256 (one kernel each, picked by pick_tile unless given). wgmma needs the sm_90a target, which CuPy's
RawModule cannot ask for (it appends its own -arch=sm_90), so this module compiles with NVRTC directly and loads
the cubin through cupy.RawModule(path=...). CuPy is imported lazily: the module imports on a CPU-only machine.
"""
import functools
import os
import tempfile

from kernels import _compile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = "gemm_wgmma.cu"
THREADS = 256
TILE_ROWS = 128  # weight rows per block
# T tokens per block -> (cp.async stages, resident blocks per SM the kernel is built for)
TILES = {64: (6, 2), 128: (6, 1), 256: (5, 1)}
# throughput of a tile relative to T = 256 (decode, barriers and copies per MMA grow as T shrinks), measured at
# M = 8192 on the layer shapes (run 2: T = 128 0.73, T = 64 0.59); pick_tile only
TILE_EFFICIENCY = {64: 0.6, 128: 0.73, 256: 1.0}
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


def smem_bytes(tile: int) -> int:
    """Dynamic shared memory of the T kernel: its stages plus 1 KB of alignment slack (swizzle atoms)."""
    return TILES[tile][0] * stage_bytes(tile) + 1024


def pick_tile(m: int, np_: int, num_sms: int = 132) -> int:
    """T minimising (blocks per SM, rounded up) x T / efficiency: the busiest SM's work. Small T only where few
    big blocks would leave SMs idle (run 2: the pick was the fastest tile on 27 of 28 shape x M points, 1.4% off on
    the last)."""
    def cost(t):
        blocks = (np_ // TILE_ROWS) * -(-m // t)
        return -(-blocks // num_sms) * t / TILE_EFFICIENCY[t]
    return min(TILES, key=lambda t: (cost(t), -t))


def raster_group(p: dict) -> int:
    """Row tiles per raster group: as many as keep GROUP_BYTES of weights, at least 1, at most all."""
    per_row_tile = (TILE_ROWS // 16) * p["Kc"] * FRAGMENT_BYTES
    return max(1, min(p["Np"] // TILE_ROWS, GROUP_BYTES // per_row_tile))


@functools.lru_cache(maxsize=None)
def _module():
    """cupy.RawModule of gemm_wgmma.cu compiled once per process by NVRTC for sm_90a."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    path = os.path.join(HERE, SOURCE)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    prog = nvrtc.createProgram(source, SOURCE, (), ())
    try:
        try:
            nvrtc.compileProgram(prog, NVRTC_OPTIONS + ("-I" + HERE,))
        except nvrtc.NVRTCError as e:
            raise RuntimeError(f"NVRTC failed on {SOURCE}:\n{nvrtc.getProgramLog(prog)}") from e
        cubin = nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    folder = tempfile.mkdtemp(prefix="nvfp4_wgmma_")
    cubin_path = os.path.join(folder, "gemm_wgmma.cubin")
    with open(cubin_path, "wb") as f:
        f.write(cubin)
    return cupy.RawModule(path=cubin_path)


@functools.lru_cache(maxsize=None)
def _function(name: str):
    return _module().get_function(name)


@functools.lru_cache(maxsize=None)
def _kernel(name: str, tile: int):
    """A GEMM kernel of tile T, allowed its dynamic shared memory."""
    kernel = _function(name)
    kernel.max_dynamic_shared_size_bytes = smem_bytes(tile)
    kernel.preferred_shared_memory_carveout = 100
    return kernel


def gemm_wgmma(x, p: dict, out, tile: int = 0, fence: bool = True, permute: bool = PERMUTE_X,
               diag: str = ""):
    """x [M, K] bf16 contiguous, p = ops.prepared(weight) -> out [M, N] bf16 (written). tile: T (64, 128, 256;
    0: pick_tile); permute: first copy x into the repacked k order (nvfp4_permute_x, xp [M, Kc * 64] bf16, one
    read + one write of x) so the GEMM moves x in 16-byte pieces, else the _x4 kernels copy 4-byte k pairs of x as
    is; fence: False runs the _nf kernels (permute only: no proxy fence between cp.async data and wgmma, bench A/B).
    diag: "_nox" / "_nodec" (T = 256, permute): bench timing diagnostics, wrong results (no x copies / no decode).
    Raises ValueError for what the kernel does not take (the caller falls back to ops.gemm)."""
    import numpy as np
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
    tile = tile or pick_tile(m, p["Np"], _num_sms(x.device))
    rows = p["Np"] // TILE_ROWS
    blocks = rows * -(-m // tile)
    if blocks >= 1 << 31:
        raise ValueError("gemm_wgmma: too many blocks")
    if not fence and not permute:
        raise ValueError("gemm_wgmma: the no-fence kernels take the permuted x only")
    vec_out = int(n % 8 == 0 and out.data_ptr() % 16 == 0)
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    stream = _compile.external_stream(torch.cuda.current_stream().cuda_stream)
    src = x
    if permute:
        src = torch.empty(m, p["Kc"] * 64, dtype=torch.bfloat16, device=x.device)
        units = m * p["Kc"] * 8
        _function("nvfp4_permute_x")((-(-units // 256),), (256,), (ptr(x), ptr(src), np.int32(m), np.int32(k),
                                                                  np.int32(p["Kc"])), stream=stream)
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(src), ptr(out), ptr(p["alpha"]), np.int32(m), np.int32(n), np.int32(k),
            np.int32(p["Kc"]), np.int32(rows), np.int32(raster_group(p)), np.int32(vec_out))
    name = f"nvfp4_gemm_wgmma_t{tile}{'' if permute else '_x4'}{'' if fence else '_nf'}{diag}"
    _kernel(name, tile)((blocks,), (THREADS,), args, shared_mem=smem_bytes(tile), stream=stream)
    return out


@functools.lru_cache(maxsize=None)
def _num_sms(device) -> int:
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count
