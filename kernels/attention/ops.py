"""Worker process (GPU path): decode attention over the paged KV pools in one launch (paged_decode.cu; its header
gives the grid, the tiling and the sources of the method), plus a combine launch when a row's keys are split.

Letters as paged_decode.cu: Nd decode rows, nH query heads, nKV kv heads, G = nH / nKV, hd head dim, B blocks per
row in the block table, BS tokens per block, S splits. The plain-torch reference is
worker/layers/paged_attention.decode_attention. CuPy is imported lazily: this module imports on a CPU-only machine.
"""
import functools
import math
import os

import torch

from kernels import _compile

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "paged_decode.cu")
TILE_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "decode_tile.cu")
MMA_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "decode_mma.cu")
MMA_WARPS, MMA_STAGES, MMA_CHUNK = 4, 3, 16  # decode_mma.cu NW, NST, CK
MMA_MAX_SPLITS = 64
MMA_MAX_BLOCKS_PER_SM = 4
MMA_HEAD_DIMS = (64, 128, 256)
# pick_kernel(): decode_mma.cu serves every row count and length it takes (SPARKINFER_DECODE_MMA=0: the CUDA-core
# kernels and torch as before it). H200, `python3 -m bench.gpu_paged_decode`, device run 2 of 2026-11-30, us mma /
# best of the others: Nd = 1 ctx 256 9.2 / 15.6 (few-row), ctx 4096 18.5 / 38.8 (torch), ctx 32768 49.4 / 159.2
# (torch); Nd = 8 ctx 512 15.1 / 29.4; Nd = 64 ctx 4096 255.3 / 626.0 (split), ctx 32768 1949 / 4625
MMA_ENABLED = os.environ.get("SPARKINFER_DECODE_MMA", "1") != "0"
TILE_HEAD_DIMS = (128, 256)  # decode_tile.cu: 128 threads own HD / 128 dims each
TILE_KEYS = 32  # decode_tile.cu TK
TILE_MAX_KEYS = 1024  # preferred(): the longest key width for which the few-row kernel beats torch (measured)
TILE_BLOCKS_PER_SM = 4  # splits of the few-row kernel: up to this many (row, kv head, split) blocks per SM
HEAD_DIMS = (64, 128, 256)
GMAX = 8  # query heads per kv head the kernel holds (paged_decode.cu GMAX)
THREADS = 128
# a split gets at least this many keys: 128 = one 32-key tile per warp at KPL 1. H200, device run 3 of 2026-11-30
# (.devscripts sweep, us, 27B layer, 128 / 256): Nd = 8 ctx 512 30.0 / 39.4, Nd = 16 ctx 512 35.3 / 44.9, Nd = 32
# ctx 256 32.8 / 44.4, each at its best KPL; equal at ctx 4096 (the SM count sets S there)
MIN_SPLIT_KEYS = 128
MAX_SPLITS = 32
MIN_ROWS = 8  # preferred(): decode rows from which the kernel serves the step
# paged_decode.cu KPL, keys a lane scores per tile: 2 (each query value read from shared memory serves two keys; 166
# registers, 3 blocks per SM) while the grid fits KPL2_BLOCKS_PER_SM blocks per SM and a split has more than
# KPL2_MIN_SPLIT_KEYS keys (with fewer, KPL 2's 64-key tiles leave warps idle), else 1 (128 registers, 4 per SM)
KPL2_BLOCKS_PER_SM = 3
KPL2_MIN_SPLIT_KEYS = 128
LOG2E = 1.4426950408889634


class PagedDecodeError(ValueError):
    """A tensor handed to paged_decode has the wrong dtype, device, shape or layout."""


def supports(q: torch.Tensor, k_pool: torch.Tensor) -> bool:
    """True when the kernel can serve these: CUDA bf16, head dim 64, 128 or 256, at most GMAX query heads per kv
    head."""
    num_heads, num_kv, head_dim = q.shape[1], k_pool.shape[2], q.shape[2]
    return (q.is_cuda and q.dtype == torch.bfloat16 and k_pool.dtype == torch.bfloat16 and head_dim in HEAD_DIMS
            and num_heads % num_kv == 0 and num_heads // num_kv <= GMAX and k_pool.shape[3] == head_dim)


def preferred(num_rows: int, head_dim: int = 256, max_keys: int = 0) -> bool:
    """Where a kernel beats the torch path it replaces (gather + two batched matmuls), CUDA-graph replays on the 27B
    layer: from MIN_ROWS (8) decode rows paged_decode.cu (`python3 -m bench.gpu_paged_decode`, H200, 2026-11-29, run
    15: Nd = 8 ctx 4096 127.4 vs 163.6 us, Nd = 32 ctx 4096 366.7 vs 531.2, Nd = 64 ctx 32768 4617.8 vs 7902.2);
    below it the few-row kernel (decode_tile.cu) while max_keys <= TILE_MAX_KEYS (2026-11-30, device run 8, us tile /
    torch: Nd = 1 ctx 256 15.8 / 26.8, ctx 512 18.2 / 32.8, Nd = 4 ctx 512 24.5 / 35.9, Nd = 7 ctx 512 27.8 / 41.4;
    but Nd = 1 ctx 4096 54.5 / 40.4, ctx 32768 181.3 / 163.5: longer rows stay with torch). The tensor-core kernel
    (decode_mma.cu, uses_mma_kernel) beats torch at every row count and length measured (MMA_ENABLED's note)."""
    if num_rows >= MIN_ROWS or uses_mma_kernel(head_dim):
        return True
    return uses_tile_kernel(num_rows, head_dim) and 0 < max_keys <= TILE_MAX_KEYS


def pick_keys_per_lane(num_blocks: int, num_sms: int, keys_per_split: int = KPL2_MIN_SPLIT_KEYS + 1) -> int:
    """KPL for a grid of num_blocks (row, kv head, split) blocks of keys_per_split keys each. H200,
    `python3 -m bench.gpu_paged_decode` (2026-11-29, run 15): KPL 2 against 1 at 256-384 blocks: Nd = 8 ctx 4096
    127.4 vs 145.7 us, Nd = 32 ctx 4096 366.7 vs 386.0; at 512 blocks (Nd = 64) KPL 1: ctx 4096 626.3 vs 963.7.
    Device run 3 of 2026-11-30 (KPL 1 / 2, us): 103 keys a split (Nd = 8 and 16 at ctx 512) 30.0 / 42.0 and
    35.3 / 47.8, 86 (Nd = 32 ctx 256) 32.8 / 45.4; 171 (Nd = 32 ctx 512) 77.8 / 68.2."""
    fits = num_blocks <= KPL2_BLOCKS_PER_SM * num_sms
    return 2 if fits and keys_per_split > KPL2_MIN_SPLIT_KEYS else 1


def num_splits(num_rows: int, num_kv: int, max_keys: int, num_sms: int) -> int:
    """S: enough (row, kv head, split) blocks for two per SM, each split at least MIN_SPLIT_KEYS of max_keys keys,
    at most MAX_SPLITS."""
    want = math.ceil(2 * num_sms / max(1, num_rows * num_kv))
    return max(1, min(want, math.ceil(max_keys / MIN_SPLIT_KEYS), MAX_SPLITS))


def tile_splits(num_rows: int, num_kv: int, max_keys: int, num_sms: int) -> int:
    """S of the few-row kernel (decode_tile.cu): one TILE_KEYS-key tile a split while the grid stays within
    TILE_BLOCKS_PER_SM blocks per SM (a one-row step is a chain of latencies, so it wants many short splits)."""
    cap = max(1, TILE_BLOCKS_PER_SM * num_sms // max(1, num_rows * num_kv))
    return max(1, min(math.ceil(max_keys / TILE_KEYS), cap))


def uses_mma_kernel(head_dim: int) -> bool:
    """Decode rows with a head dim decode_mma.cu takes go to the tensor-core kernel, unless SPARKINFER_DECODE_MMA=0
    (MMA_ENABLED)."""
    return MMA_ENABLED and head_dim in MMA_HEAD_DIMS


def pick_kernel(num_rows: int, head_dim: int) -> str:
    """paged_decode's kernel="auto": "mma" (uses_mma_kernel), else "tile" (uses_tile_kernel), else "split"."""
    if uses_mma_kernel(head_dim):
        return "mma"
    return "tile" if uses_tile_kernel(num_rows, head_dim) else "split"


def uses_tile_kernel(num_rows: int, head_dim: int) -> bool:
    """Few rows (under MIN_ROWS) with a head dim decode_tile.cu takes go to the few-row kernel."""
    return num_rows < MIN_ROWS and head_dim in TILE_HEAD_DIMS


def mma_smem_bytes(head_dim: int, warps: int = MMA_WARPS, stages: int = MMA_STAGES) -> int:
    """Dynamic shared memory of decode_mma.cu: each warp's ring of `stages` chunks (16 K and 16 V rows of head_dim
    bf16), or the warps' f32 merge area if larger."""
    return max(warps * stages * 2 * MMA_CHUNK * head_dim * 2, warps * 8 * head_dim * 4)


def mma_splits(num_rows: int, num_kv: int, max_keys: int, num_sms: int, head_dim: int,
               warps: int = MMA_WARPS, stages: int = MMA_STAGES) -> int:
    """S of the tensor-core kernel (decode_mma.cu): enough (row, kv head, split) blocks for the SMs at as many
    blocks a SM as its shared memory allows (at most MMA_MAX_BLOCKS_PER_SM: 80-207 registers a thread), each split at least one chunk a warp, at most MMA_MAX_SPLITS."""
    per_sm = max(1, min(MMA_MAX_BLOCKS_PER_SM, (227 * 1024) // mma_smem_bytes(head_dim, warps, stages)))
    want = math.ceil(per_sm * num_sms / max(1, num_rows * num_kv))
    return max(1, min(want, math.ceil(max_keys / (warps * MMA_CHUNK)), MMA_MAX_SPLITS))


@functools.lru_cache(maxsize=None)
def _mma_kernel(head_dim: int, warps: int = MMA_WARPS, stages: int = MMA_STAGES):
    import cupy

    defines = (f"-DHD={head_dim}", f"-DGMAX={GMAX}", f"-DNW={warps}", f"-DNST={stages}",
               "-I" + os.path.dirname(MMA_SOURCE))
    with open(MMA_SOURCE, encoding="utf-8") as f:
        module = cupy.RawModule(code=f.read(), options=_compile.OPTIONS + defines)
    fn = module.get_function("paged_decode_mma")
    fn.max_dynamic_shared_size_bytes = mma_smem_bytes(head_dim, warps, stages)
    return fn


@functools.lru_cache(maxsize=None)
def _kernel(name: str, head_dim: int, kpl: int, source: str = SOURCE):
    import cupy

    defines = (f"-DHD={head_dim}", f"-DGMAX={GMAX}", f"-DKPL={kpl}", "-I" + os.path.dirname(source))
    with open(source, encoding="utf-8") as f:
        module = cupy.RawModule(code=f.read(), options=_compile.OPTIONS + defines)
    return module.get_function(name)


def _check(q, k_pool, v_pool, tables, num_keys) -> None:
    """Raises PagedDecodeError unless the tensors are what paged_decode takes."""
    num_rows, head_dim = q.shape[0], q.shape[2]
    pools_ok = v_pool.shape == k_pool.shape and k_pool.is_contiguous() and v_pool.is_contiguous()
    if not supports(q, k_pool) or not pools_ok:
        raise PagedDecodeError(f"paged_decode: q {tuple(q.shape)} {q.dtype}, pools {tuple(k_pool.shape)} "
                               f"{k_pool.dtype}: needs CUDA bf16, head dim in {HEAD_DIMS}, <= {GMAX} heads per kv head")
    if q.stride(2) != 1 or q.stride(1) != head_dim or tables.dtype != torch.int64 or tables.stride(1) != 1:
        raise PagedDecodeError("paged_decode: q heads must be contiguous, tables int64 with contiguous rows")
    if num_keys.dtype != torch.int32 or num_keys.numel() != num_rows or tables.shape[0] != num_rows:
        raise PagedDecodeError("paged_decode: num_keys must be int32 [Nd] and tables [Nd, B]")


def paged_decode(q, k_pool, v_pool, tables, num_keys, scale: float, max_keys: int, out=None,
                 keys_per_lane: int = 0, kernel: str = "auto", mma_config: tuple = ()) -> torch.Tensor:
    """Attention of one query token per row over its paged keys.

    q [Nd, nH, hd] bf16 (heads contiguous; any row stride); k_pool, v_pool [blocks, BS, nKV, hd] bf16 contiguous;
    tables [Nd, B] int64 (row r's key j lives in block tables[r, j // BS], offset j % BS); num_keys [Nd] int32 CUDA,
    each in 1 .. B * BS (the row's context and its new token, already written to the pools); scale: the softmax
    scale; max_keys: a host bound on num_keys (sets S, a CUDA graph keeps it fixed); keys_per_lane: the split
    kernel's KPL (1 or 2; 0: pick_keys_per_lane's); kernel: "tile" (decode_tile.cu, head dims TILE_HEAD_DIMS),
    "split" (paged_decode.cu), "mma" (decode_mma.cu, tensor cores) or "auto" (pick_kernel); mma_config: (warps,
    stages) of decode_mma.cu (benches; default MMA_WARPS, MMA_STAGES). Returns out [Nd, nH, hd] bf16 (written into
    `out` when given, contiguous). Raises PagedDecodeError for what the kernels do not take.
    """
    _check(q, k_pool, v_pool, tables, num_keys)
    num_rows, num_heads, head_dim = q.shape
    if out is None:
        out = torch.empty(num_rows, num_heads, head_dim, dtype=torch.bfloat16, device=q.device)
    if num_rows == 0:
        return out
    if kernel == "auto":
        kernel = pick_kernel(num_rows, head_dim)
    if kernel == "tile" and head_dim not in TILE_HEAD_DIMS:
        raise PagedDecodeError(f"paged_decode: the few-row kernel takes head dims {TILE_HEAD_DIMS}, not {head_dim}")
    _launch(kernel, q, k_pool, v_pool, tables, num_keys, scale, max_keys, out, keys_per_lane, mma_config)
    return out


# Where launches() puts the addresses a step plan changes per layer (kernels/attention/step_plan.py)
ARG_Q, ARG_K_POOL, ARG_V_POOL, ARG_OUT, ARG_WS, COMBINE_ARG_OUT = 0, 2, 3, 7, 8, 1


def _launch(kernel, q, k_pool, v_pool, tables, num_keys, scale, max_keys, out, keys_per_lane, mma_config) -> None:
    """The chosen kernel's launch, then the combine launch where a row's keys are split."""
    stream = _compile.current_stream()
    found, _ws = launches(kernel, q, k_pool, v_pool, tables, num_keys, scale, max_keys, out, keys_per_lane, mma_config)
    for fn, grid, block, args, shared_mem in found:
        fn(grid, block, args, stream=stream, shared_mem=shared_mem)


def launches(kernel, q, k_pool, v_pool, tables, num_keys, scale, max_keys, out, keys_per_lane=0, mma_config=()):
    """paged_decode's launches for a chosen kernel ("mma", "tile" or "split"; arguments as paged_decode) ->
    ([(function, grid, block, args, shared_mem)], ws): the kernel's launch and, where a row's keys are split, the
    combine's, and the float32 split workspace [Nd * nKV * S * (GMAX * hd + 2 GMAX)] they share (None with one split;
    the caller keeps it alive until they ran). args hold the addresses at ARG_Q, ARG_K_POOL, ARG_V_POOL, ARG_OUT and
    ARG_WS (out's again with one split), the combine's out at COMBINE_ARG_OUT."""
    import numpy as np

    num_rows, num_heads, head_dim = q.shape
    num_kv, sms = k_pool.shape[2], _compile.num_sms(q.device)
    warps, stages = mma_config or (MMA_WARPS, MMA_STAGES)
    if kernel == "mma":
        splits = mma_splits(num_rows, num_kv, max_keys, sms, head_dim, warps, stages)
    elif kernel == "tile":
        splits = tile_splits(num_rows, num_kv, max_keys, sms)
    else:
        splits = num_splits(num_rows, num_kv, max_keys, sms)
    ws = None
    if splits > 1:
        entry = GMAX * head_dim + 2 * GMAX
        ws = torch.empty(num_rows * num_kv * splits * entry, dtype=torch.float32, device=q.device)
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    group = num_heads // num_kv
    args = (ptr(q), np.int64(q.stride(0)), ptr(k_pool), ptr(v_pool), ptr(tables), np.int64(tables.stride(0)),
            ptr(num_keys), ptr(out), ptr(out if ws is None else ws), np.int32(num_kv), np.int32(group),
            np.int32(k_pool.shape[1]), np.float32(scale * LOG2E))
    grid = (splits, num_kv, num_rows)
    if kernel == "mma":
        found = [(_mma_kernel(head_dim, warps, stages), grid, (32 * warps,), args,
                  mma_smem_bytes(head_dim, warps, stages))]
    elif kernel == "tile":
        found = [(_kernel("paged_decode_tile", head_dim, 1, TILE_SOURCE), grid, (THREADS,), args, 0)]
    else:
        kpl = keys_per_lane or pick_keys_per_lane(splits * num_kv * num_rows, sms, -(-max_keys // splits))
        found = [(_kernel("paged_decode", head_dim, kpl), grid, (THREADS,), args, 0)]
    if splits > 1:  # the KPL 1 module's combine (the same code in each): no second compile mid-run for a new KPL
        found.append((_kernel("paged_decode_combine", head_dim, 1), (num_heads, num_rows), (head_dim // 4,), (
            ptr(ws), ptr(out), np.int32(num_kv), np.int32(group), np.int32(splits)), 0))
    return found, ws
