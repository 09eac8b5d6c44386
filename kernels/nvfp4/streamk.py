"""Worker process (GPU path): the stream-K launch of the NVFP4 wgmma GEMM (gemm_wgmma.cu gemm_stream_k, the _skm
kernels: one persistent block per SM, the output tiles' 64-k chunk iterations cut into equal ranges; see the .cu file
and kernels/nvfp4/NOTES.md, session 4) and the choice of where it serves (pick). gemm_wgmma.gemm_wgmma calls both;
the launch shares its permute launch, kernel cache and scratch buffers.
"""
from kernels import _compile
from kernels.nvfp4 import gemm_wgmma

# pick: M range, grid limit (T = 256 tiles per SM) and the x size above which one wave of whole tiles runs first
M_RANGE = (256, 2048)
MAX_WAVES = 16
X_BYTES = 48 << 20


def pick(m: int, np_: int, k: int, num_sms: int = 132) -> int:
    """Waves of whole T = 256 tiles the stream-K kernel runs first, or -1 (not stream-K: gemm_wgmma.pick's tile x
    split-K). Stream-K for 256 <= M <= 2048 (the range measured) while its T = 256 grid is under MAX_WAVES waves; 0
    waves (every tile's chunks spread over all SMs) unless x exceeds X_BYTES, then 1 (its first wave runs
    as whole tiles, close together in the raster, which keeps x in L2: 5120x17408 M = 2048 599.9 vs 657.0 us).
    H200, `python3 -m bench.gpu_stream_k` (2026-11-29): stream-K 0.66-0.91 of cuBLAS bf16 on the layer shapes at
    M = 256 .. 2048 where the pick got 0.49-0.83; the pick stays faster on the LM head from M = 1024 (58 waves)."""
    tiles = (np_ // gemm_wgmma.TILE_ROWS) * -(-m // 256)
    if not M_RANGE[0] <= m <= M_RANGE[1] or tiles > MAX_WAVES * num_sms:
        return -1
    return 0 if m * k * 2 <= X_BYTES else 1


def launch(x, p: dict, out, tile: int, waves: int, num_sms: int) -> bool:
    """The _skm launch: G = num_sms persistent blocks (one resident per SM), `waves` x G whole tiles first (at most
    all), the rest stream-K. -> False (nothing launched) where its workspace would have to grow in a graph capture."""
    import numpy as np
    import torch

    g = gemm_wgmma
    m, rows = x.shape[0], p["Np"] // g.TILE_ROWS
    tiles = rows * -(-m // tile)
    ws = g.scratch("stream_k", x.device, num_sms * tile * g.TILE_ROWS, torch.float32)
    flags = g.scratch("stream_k_flags", x.device, num_sms, torch.int32)
    if ws is None or flags is None:
        return False
    stream = _compile.current_stream()
    xp, ptr = g.permuted_x(x, p, stream), (lambda t: np.uint64(t.data_ptr()))
    vec_out = int(p["N"] % 8 == 0 and out.data_ptr() % 16 == 0)
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(xp), ptr(out), ptr(p["alpha"]), np.int32(m), np.int32(p["N"]),
            np.int32(p["K"]), np.int32(p["Kc"]), np.int32(rows), np.int32(g.raster_group(p)), np.int32(vec_out),
            ptr(ws), ptr(flags), np.int32(1), np.int32(min(tiles // num_sms, waves) * num_sms))
    g.kernel(f"nvfp4_gemm_wgmma_t{tile}_skm", tile)((num_sms,), (g.THREADS,), args, shared_mem=g.smem_bytes(tile),
                                                    stream=stream)
    return True
