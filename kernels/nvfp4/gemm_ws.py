"""Worker process (GPU path): the warp-specialised NVFP4 GEMM kernels (gemm_ws.cuh, compiled into gemm_wgmma.cu's
module), which gemm_wgmma.gemm_wgmma runs for its T = 64 and 128 tiles (33-128 rows: decode batches, short prefills)
unless WS_GEMM is off.

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
