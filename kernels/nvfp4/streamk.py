"""Worker process (GPU path): the stream-K launch of the NVFP4 wgmma GEMM (gemm_wgmma.cu gemm_stream_k, the _skm
kernels: one persistent block per SM, the output tiles' 64-k chunk iterations cut into equal ranges; see the .cu file
and kernels/nvfp4/NOTES.md, session 4) and the choice of where it serves (pick, choice). gemm_wgmma.gemm_wgmma
calls both; the launch shares its permute launch, kernel cache and scratch buffers.
"""
import functools
import os

from kernels import _compile
from kernels.nvfp4 import gemm_wgmma, wgmma_pick

# pick: M range, grid limit (T = 256 tiles per SM) and the x size above which one wave of whole tiles runs first
M_RANGE = (256, 2048)
MAX_WAVES = 16
X_BYTES = 48 << 20
# T = 128 stream-K (no whole tiles first) for decode batches of SMALL_M_RANGE rows, where it beats the
# warp-specialised whole tiles' split-K pick (gemm_ws) in wgmma_pick's cost model: SMALL_FIXED_US + SMALL_CHUNK_US x
# the 64-k chunks a SM takes. The two constants choose the faster on all 30 points of session 17's device run 10 (10
# shapes x M = 65 / 96 / 128, gemm_ws_sk.cuh's kernel with its 8-stage ring) with the least time error (11%; least
# squares gives 8.69 + 0.504). Run 10, us, stream-K / the pick at M = 65 and 128: 6144x5120 25.0 / 33.2, 26.6 / 33.5;
# 10240x5120 33.4 / 45.1, 34.5 / 43.2; 12288x5120 37.6 / 43.3, 39.5 / 43.6; 5120x6144 25.3 / 27.6, 27.4 / 30.3;
# 17408x5120 49.0 / 75.9, 49.8 / 80.9; 34816x5120 84.0 / 119.1, 92.1 / 122.2; 5120x17408 51.1 / 55.2, 54.1 / 58.4;
# 14336x5120 41.8 / 43.7, 43.7 / 43.8; LM head 572.2 / 579.8, 631.2 / 648.0; the pick kept on 16384x5120 (45.3 /
# 44.0, 47.0 / 44.5: 128 tiles fill one wave). M = 64: the pick's T = 64 tiles win on every shape (run 3).
SMALL_M_RANGE = (65, 128) if os.environ.get("SPARKINFER_NVFP4_SMALL_SK", "1") == "1" else (1, 0)  # 0: off (A/B)
SMALL_FIXED_US, SMALL_CHUNK_US = 9.3, 0.506
# T = 128 with no whole tiles first runs gemm_ws_sk.cuh's kernel (the warp-specialised main loop; run 10: 5-13%
# faster than the _skm kernel of gemm_stream_k.cuh on every shape) unless SPARKINFER_NVFP4_WS_SK=0 (the _skm kernel,
# A/B)
WS = os.environ.get("SPARKINFER_NVFP4_WS_SK", "1") == "1"


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


def small_m_wins(m: int, np_: int, kc: int, num_sms: int = 132) -> bool:
    """Whether T = 128 stream-K (0 waves of whole tiles) is cheaper than wgmma_pick.pick's (T, S) for m rows of an
    Np x (Kc 64-k chunks) weight: only in SMALL_M_RANGE, both priced by their cost models
    (wgmma_pick._busiest_sm_us; SMALL_FIXED_US + SMALL_CHUNK_US per chunk a SM takes here)."""
    tiles = (np_ // gemm_wgmma.TILE_ROWS) * -(-m // 128)
    if not SMALL_M_RANGE[0] <= m <= SMALL_M_RANGE[1]:
        return False
    tile, splits = wgmma_pick.pick(m, np_, kc, num_sms)
    whole = wgmma_pick._busiest_sm_us(tile, splits, m, np_, kc, num_sms)
    return SMALL_FIXED_US + SMALL_CHUNK_US * -(-tiles * kc // num_sms) < whole


def choice(m: int, np_: int, k: int, num_sms: int = 132) -> tuple:
    """-> (T, waves) of the stream-K launch gemm_wgmma makes by default: (256, pick's waves) in M_RANGE, (128, 0)
    where small_m_wins, else (0, -1): not stream-K. Memoised (wgmma_pick's module docstring says why), keyed also
    by M_RANGE and SMALL_M_RANGE, which benches and tests set."""
    return _choice(m, np_, k, num_sms, M_RANGE, SMALL_M_RANGE)


@functools.lru_cache(maxsize=wgmma_pick.MEMO)
def _choice(m: int, np_: int, k: int, num_sms: int, m_range: tuple, small_m_range: tuple) -> tuple:
    """choice's answer while M_RANGE and SMALL_M_RANGE are m_range and small_m_range (pick and small_m_wins read
    them)."""
    waves = pick(m, np_, k, num_sms)
    if waves >= 0:
        return 256, waves
    if small_m_wins(m, np_, -(-k // 64), num_sms):
        return 128, 0
    return 0, -1


def launch(x, p: dict, out, tile: int, waves: int, num_sms: int) -> bool:
    """The _skm launch: G = num_sms persistent blocks (one resident per SM), `waves` x G whole tiles first (at most
    all), the rest stream-K. -> False (nothing launched) where its workspace would have to grow in a graph capture."""
    import numpy as np
    import torch

    from kernels.nvfp4 import gemm_ws

    if WS and tile == gemm_ws.SKM_TILE and waves == 0 and gemm_ws.WS_GEMM:
        return gemm_ws.launch_stream_k(x, p, out, num_sms)
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
    w = g.weight_args(p)
    args = (w[0], w[1], ptr(xp), ptr(out), w[2], np.int32(m), *w[3:], np.int32(vec_out), ptr(ws), ptr(flags),
            np.int32(1), np.int32(min(tiles // num_sms, waves) * num_sms))
    g.kernel(f"nvfp4_gemm_wgmma_t{tile}_skm", tile)((num_sms,), (g.THREADS,), args, shared_mem=g.smem_bytes(tile),
                                                    stream=stream)
    return True
