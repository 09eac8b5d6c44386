"""Worker process (GPU path): the warp-specialised NVFP4 GEMM kernels (gemm_ws.cuh, compiled into gemm_wgmma.cu's
module), which gemm_wgmma.gemm_wgmma runs for its T = 64 and 128 tiles (33-128 rows: decode batches, short prefills)
unless WS_GEMM is off.

Also gemm_wsb.cuh's kernels (launch_bulk), which gemm_wgmma runs for 17-64 rows where bulk_choice says.

gemm_ws(x [M, K] bf16, p = ops.prepared(weight), out [M, N] bf16) -> out = x W^T on torch's current stream: two
launches, nvfp4_permute_x_sw (x into xq [Kc][Mp][64] bf16, the tile's rows of a chunk contiguous and pre-swizzled, so
one bulk copy moves them) and the GEMM (a producer warp feeds the stage ring; no block barrier a chunk). Split-K as
gemm_wgmma (wgmma_pick's S unless given), through the same workspace and counters.
"""
import functools
import os

from kernels import _compile
from kernels.nvfp4.gemm_wgmma import (TILE_ROWS, _function, _tile_and_splits, check_args, kernel, scratch,
                                      smem_bytes, split_buffers, stage_bytes, weight_args)

WS_TILES = (64, 128)  # the tiles gemm_wgmma sends here
WS_THREADS = 288  # 2 MMA warpgroups + the producer warp
# gemm_wgmma's T = 64 / 128 launches go to these kernels (session 10, us, gemm_wgmma / _ws; run 4, T = 64 at pick's
# S: 16384x5120 M = 40 40.9 / 35.9, 34816x5120 77.2 / 73.1, 5120x17408 41.2 / 39.0, LM head 422.8 / 372.1; run 7,
# T = 128, S = 1: M = 128 16384x5120 49.4 / 43.7, 34816x5120 138.0 / 120.7); SPARKINFER_NVFP4_WS=0 keeps
# gemm_wgmma's own kernels
WS_GEMM = os.environ.get("SPARKINFER_NVFP4_WS", "1") == "1"
SKM_TILE, SKM_STAGES = 128, 8  # the stream-K kernel built with this main loop (gemm_ws_sk.cuh) and its ring
# its dynamic shared memory: the ring, 1 KB of alignment slack, the epilogue's own staging (T rows x PITCH bf16)
SKM_SMEM = SKM_STAGES * stage_bytes(SKM_TILE) + 1024 + SKM_TILE * 136 * 2


def gemm_ws(x, p: dict, out, splits: int = 0, tile: int = 64):
    """x [M, K] bf16 contiguous, p = ops.prepared(weight) -> out [M, N] bf16 (written), by the T = tile kernels
    (one of WS_TILES). splits: S split-K blocks per output tile (0: pick's for that tile). Raises ValueError as
    gemm_wgmma does, and for a tile not built here."""
    check_args(x, p, out, tile, True, True, "", splits)
    if tile not in WS_TILES:
        raise ValueError(f"gemm_ws: tile must be one of {WS_TILES}, got {tile}")
    _, splits = _tile_and_splits(x.shape[0], p, tile, splits, True, _compile.num_sms(x.device))
    return launch(x, p, out, splits, tile)


def _permuted_args(x, p: dict, out, tile: int, ws, counters, splits: int, stream) -> tuple:
    """Launches nvfp4_permute_x_sw (x into xq [Kc][Mp][64], Mp = M rounded up to the tile) and returns the _ws / _skm
    kernels' arguments for it: ws and counters (the split-K or stream-K buffers) None where a kernel takes none."""
    import numpy as np
    import torch

    m, kc = x.shape[0], p["Kc"]
    mp = -(-m // tile) * tile
    ptr = lambda t: np.uint64(0) if t is None else np.uint64(t.data_ptr())  # noqa: E731
    xq = torch.empty(kc, mp, 64, dtype=torch.bfloat16, device=x.device)
    _function("nvfp4_permute_x_sw")((-(-kc * mp * 8 // 256),), (256,), (
        ptr(x), ptr(xq), np.int32(m), np.int32(p["K"]), np.int32(kc), np.int32(mp)), stream=stream)
    vec_out = int(p["N"] % 8 == 0 and out.data_ptr() % 16 == 0)
    w = weight_args(p)
    return (w[0], w[1], ptr(xq), ptr(out), w[2], np.int32(m), *w[3:], np.int32(vec_out), ptr(ws), ptr(counters),
            np.int32(splits), np.int32(mp))


def launch(x, p: dict, out, splits: int, tile: int):
    """The permute and GEMM launches for checked arguments and a given S (>= 1)."""
    tiles = (p["Np"] // TILE_ROWS) * -(-x.shape[0] // tile)
    ws, counters, splits = split_buffers(x.device, tiles, tile, splits)
    stream = _compile.current_stream()
    args = _permuted_args(x, p, out, tile, ws, counters, splits, stream)
    name = f"nvfp4_gemm_ws_t{tile}" + ("_sk" if splits > 1 else "")
    kernel(name, tile)((tiles * splits,), (WS_THREADS,), args, shared_mem=smem_bytes(tile), stream=stream)
    return out


@functools.lru_cache(maxsize=None)
def _skm_kernel():
    kern = _function(f"nvfp4_gemm_ws_t{SKM_TILE}_skm")
    kern.max_dynamic_shared_size_bytes = SKM_SMEM
    kern.preferred_shared_memory_carveout = 100
    return kern


def launch_stream_k(x, p: dict, out, num_sms: int) -> bool:
    """The permute and nvfp4_gemm_ws_t128_skm launches (gemm_ws_sk.cuh: T = 128 stream-K with no whole tiles first,
    num_sms persistent blocks, one resident a SM) for checked arguments, through streamk's workspace and flags.
    -> False (nothing launched) where those would have to grow during a CUDA graph capture."""
    import torch

    ws = scratch("stream_k", x.device, num_sms * SKM_TILE * TILE_ROWS, torch.float32)
    flags = scratch("stream_k_flags", x.device, num_sms, torch.int32)
    if ws is None or flags is None:
        return False
    stream = _compile.current_stream()
    args = _permuted_args(x, p, out, SKM_TILE, ws, flags, 1, stream)
    _skm_kernel()((num_sms,), (WS_THREADS,), args, shared_mem=SKM_SMEM, stream=stream)
    return True


# gemm_wsb.cuh (one token tile fed by bulk copies of several chunks a stage) for 17-64 rows where bulk_choice
# says; SPARKINFER_NVFP4_WSB=0 keeps the pick's kernels (A/B). Its builds: (T, blocks a SM) -> (chunks a stage, stages)
WSB = os.environ.get("SPARKINFER_NVFP4_WSB", "1") == "1"
WSB_CONFIGS = {(32, 1): (4, 5), (64, 1): (4, 4), (32, 2): (4, 3), (64, 2): (2, 4)}
WSB_M = (17, 64)
WSB_WAVE = (0.8, 1.0)  # row tiles / SMs for one block a SM
WSB_MANY_WAVES = 8  # row tiles / SMs from which two blocks a SM


def bulk_choice(m: int, np_: int, kc: int, num_sms: int = 132):
    """-> (T, blocks a SM) of the gemm_wsb launch (S = 1) the default GEMM makes for m rows of an Np x (Kc 64-k
    chunks) weight, or None. 17-64 rows (T = 32 to 32 rows, else 64) on grids of row tiles that fill one wave with
    one block a SM (WSB_WAVE) or are many waves (WSB_MANY_WAVES: two blocks a SM), where H200 session 18 run 9
    measured it faster than the pick (us, pick / wsb at M = 24, 32, 64): 16384x5120 32.2 / 28.7, 32.5 / 28.8, 38.0
    / 32.7; 14336x5120 31.2 / 28.4, 32.0 / 28.1, 37.6 / 32.0; LM head 319.6 / 294.2, 337.0 / 287.4, 420.9 / 396.9.
    Elsewhere it lost (one block a SM leaves a second wave: 17408x5120 M = 32 37.2 / 39.8 at its best S, 34816x5120
    60.1 / 63.2, 6144x5120 17.8 / 19.6) or tied (5120x6144, 5120x17408, 10240x5120)."""
    if not (WSB and WSB_M[0] <= m <= WSB_M[1]):
        return None
    tile, rows = (32 if m <= 32 else 64), np_ // TILE_ROWS
    if WSB_WAVE[0] * num_sms <= rows <= WSB_WAVE[1] * num_sms:
        blocks = 1
    elif rows >= WSB_MANY_WAVES * num_sms:
        blocks = 2
    else:
        return None
    return (tile, blocks) if kc % WSB_CONFIGS[(tile, blocks)][0] == 0 else None


def wsb_smem(tile: int, blocks: int = 1) -> int:
    """gemm_wsb.cuh's dynamic shared memory: its stages (x tiles, fragments, scales of CH chunks, 1 KB aligned)
    plus 1 KB of alignment slack."""
    ch, stages = WSB_CONFIGS[(tile, blocks)]
    stage = ch * (tile * 128 + 8 * 512 + 8 * 64)
    return stages * (-(-stage // 1024) * 1024) + 1024


@functools.lru_cache(maxsize=None)
def _wsb_kernel(name: str, tile: int, blocks: int):
    kern = _function(name)
    kern.max_dynamic_shared_size_bytes = wsb_smem(tile, blocks)
    kern.preferred_shared_memory_carveout = 100
    return kern


def launch_bulk(x, p: dict, out, splits: int, tile: int, blocks: int = 1):
    """The permute and gemm_wsb.cuh launches for checked arguments: x [M <= tile, K] bf16 -> out [M, N] bf16, S =
    splits split-K blocks a row tile over its Kc / CH stages, the (tile, blocks) build of WSB_CONFIGS. Raises
    ValueError where M > tile, Kc % CH != 0 or no such build."""
    m = x.shape[0]
    if (tile, blocks) not in WSB_CONFIGS or m > tile or p["Kc"] % WSB_CONFIGS[(tile, blocks)][0]:
        raise ValueError(f"gemm_wsb: M <= T, Kc % CH == 0 and a build of {sorted(WSB_CONFIGS)}")
    if not 1 <= splits <= p["Kc"] // WSB_CONFIGS[(tile, blocks)][0]:
        raise ValueError("gemm_wsb: splits must be 1 .. Kc / CH")
    tiles = p["Np"] // TILE_ROWS
    ws, counters, splits = split_buffers(x.device, tiles, tile, splits)
    stream = _compile.current_stream()
    args = _permuted_args(x, p, out, tile, ws, counters, splits, stream)
    name = f"nvfp4_gemm_wsb_t{tile}" + ("_b2" if blocks == 2 else "") + ("_sk" if splits > 1 else "")
    _wsb_kernel(name, tile, blocks)((tiles * splits,), (WS_THREADS,), args, shared_mem=wsb_smem(tile, blocks),
                                    stream=stream)
    return out
