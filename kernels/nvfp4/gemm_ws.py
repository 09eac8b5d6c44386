"""Worker process (GPU path): the warp-specialised NVFP4 GEMM kernels (gemm_ws.cuh, compiled into gemm_wgmma.cu's
module) for decode batches of T = 32 / 64 tokens a tile.

gemm_ws(x [M, K] bf16, p = ops.prepared(weight), out [M, N] bf16) -> out = x W^T on torch's current stream: two
launches, nvfp4_permute_x_sw (x into xq [Kc][Mp][64] bf16, the tile's rows of a chunk contiguous and pre-swizzled, so
one bulk copy moves them) and the GEMM (a producer warp feeds the ring by bulk copies; no block barrier a chunk).
Tile and split-K as gemm_wgmma (wgmma_pick's choice unless given), split-K through the same workspace and counters.
"""
from kernels import _compile
from kernels.nvfp4.gemm_wgmma import (TILE_ROWS, _function, _tile_and_splits, check_args, kernel, raster_group, scratch,
                                      smem_bytes)

WS_TILES = (32, 64)
WS_THREADS = 288  # 2 MMA warpgroups + the producer warp
# who copies the weights (gemm_ws.cuh): "" the producer by bulk copies, "_lsu" the producer's lanes by cp.async,
# "_own" each MMA warp its own fragment
WS_MODES = ("", "_lsu", "_own")


def gemm_ws(x, p: dict, out, tile: int = 0, splits: int = 0, mode: str = ""):
    """x [M, K] bf16 contiguous, p = ops.prepared(weight) -> out [M, N] bf16 (written). tile: T in WS_TILES (0:
    pick's, which must then be one of them); splits: S split-K blocks per output tile (0: pick's for that tile).
    mode: one of WS_MODES. Raises ValueError for what the kernels do not take (as gemm_wgmma, plus T > 64)."""
    import numpy as np
    import torch

    check_args(x, p, out, tile, True, True, "", splits)
    m, n, kc = x.shape[0], p["N"], p["Kc"]
    tile, splits = _tile_and_splits(m, p, tile, splits, True, _compile.num_sms(x.device))
    if mode not in WS_MODES:
        raise ValueError(f"gemm_ws: mode must be one of {WS_MODES}")
    if tile not in WS_TILES:
        raise ValueError(f"gemm_ws: tile must be one of {WS_TILES}, got {tile}")
    rows, mp = p["Np"] // TILE_ROWS, -(-m // tile) * tile
    tiles = rows * (mp // tile)
    ws = counters = None
    if splits > 1:
        ws = scratch("split_k", x.device, tiles * tile * TILE_ROWS, torch.float32)
        counters = scratch("counters", x.device, tiles, torch.int32)
        if ws is None or counters is None:
            splits = 1
    stream = _compile.current_stream()
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    xq = torch.empty(kc, mp, 64, dtype=torch.bfloat16, device=x.device)
    _function("nvfp4_permute_x_sw")((-(-kc * mp * 8 // 256),), (256,), (
        ptr(x), ptr(xq), np.int32(m), np.int32(p["K"]), np.int32(kc), np.int32(mp)), stream=stream)
    vec_out = int(n % 8 == 0 and out.data_ptr() % 16 == 0)
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(xq), ptr(out), ptr(p["alpha"]), np.int32(m), np.int32(n),
            np.int32(p["K"]), np.int32(kc), np.int32(rows), np.int32(raster_group(p)), np.int32(vec_out),
            np.uint64(0) if splits == 1 else ptr(ws), np.uint64(0) if splits == 1 else ptr(counters),
            np.int32(splits), np.int32(mp))
    name = f"nvfp4_gemm_ws_t{tile}{mode}" + ("_sk" if splits > 1 else "")
    kernel(name, tile)((tiles * splits,), (WS_THREADS,), args, shared_mem=smem_bytes(tile), stream=stream)
    return out

