"""Launcher of gemv_sk.cu (v13, 2..32 rows, one 512-thread block a SM): fragments streamed global -> registers;
9-24 rows on stream-K quads (partial quads summed through the split-K workspace; x read through L1, or staged in
shared memory on the largest weights, where 4-8 rows take the same entry), 2-8 rows on block-owned tiles (x staged,
partial tiles summed in shared memory), and 2-32 rows on block-owned tiles with x read through L1 where blocks own
2.4-17 tiles at K <= 6144 (own_xg). Method: gemv_sk.cu's header.
"""
import functools
import os

import torch

from kernels import _compile
from kernels.nvfp4 import gemv_bt, ops

GEMV_SK = os.environ.get("SPARKINFER_NVFP4_SK", "1") == "1"
THREADS = 512  # gemv_sk_core.cuh SK_THREADS
WARPGROUPS, WARPS = THREADS // 128, THREADS // 32
STATIC_SMEM = 2 * WARPS * 32 * 4 * 4 + 2 * WARPS * 4 + 1024 + 16 + 256  # own: slots, slot tiles; lut, flags, slack
X_MAX_BYTES = ops.BLOCK_SMEM_MAX - STATIC_SMEM
# gemv_pick's rule (H200 session 19 runs 4, 7 and 8, bench timing, us, previous pick / v13):
# - 9-16 rows: x read through L1 below STAGE_MIN_CHUNKS fragments (16-row tiles x chunks), M = 16: 5120x17408 v2 27.8
#   / 22.8, 5120x6144 13.8 / 12.2, 6144x5120 14.2 / 12.1, 10240x5120 19.5 / 16.4, 14336x5120 22.5 / 20.7, 17408x5120
#   25.0 / 24.1; from it x staged: 34816x5120 btm 45.0 / 38.5 (38.3 / 42.4 through L1), LM head v2 312.6 / 233.1.
# - 17-24 rows (instead of the wgmma GEMM): x through L1, M = 17 / 24: 17408x5120 35.9 / 29.3, 35.5 / 31.4;
#   34816x5120 58.6 / 51.4, 58.9 / 55.6; 14336x5120 28.1 / 24.9, 28.3 / 26.8; 5120x17408 32.4 / 28.2, 33.0 / 30.2;
#   5120x6144 18.8 / 14.3, 18.8 / 15.2; not the LM head (300.8 / 328.8 at M = 17), nor from WIDE_TILE_MIN_M rows a
#   weight whose 128-row tiles fill 95-100% of the SMs (16384x5120 on 128: gemm_wsb's one full wave). Session 20
#   device run 3, 3 chunks in flight, GEMM / v13: 16384x5120 M = 17 28.9 / 27.1, 20 29.1 / 28.3, 24 28.9 / 29.5;
#   LM head M = 17 282.6 / 307.4.
# - 2-8 rows: x staged, where blocks own 1 to OWN_MAX_TILES tiles with imbalance <= OWN_MAX_IMBALANCE: M = 2
#   14336x5120 19.5 / 16.9, 12288x5120 bcr 17.0 / 14.9, 6144x5120 10.7 / 10.0; M = 8 16384x5120 20.3 / 20.0; not
#   34816x5120 (16.5 tiles a block: btm 32.9 / 34.5 at M = 2), the LM head (bcr 200.2 / 214.3 at M = 2), the N = 5120
#   shapes (imbalance 1.24: 5120x6144 M = 4 10.8 / 11.7).
# - block-owned tiles with x read through L1 (session 22 device runs 2-3, us, previous pick / own_xg), at K <= 6144
#   on 2.4 tiles a block or more (fewer unmeasured): 9-16 rows up to 7 tiles a block, imbalance <= 1.1, M = 16
#   6144x5120 11.9 / 11.1, 10240x5120 16.1 / 15.2, 12288x5120 18.3 / 17.5, 14336x5120 20.2 / 19.5 (not 16384x5120
#   21.8 / 22.8, 17408x5120 23.3 / 23.7, 5120x6144 at 1.24: 12.0 / 12.3); 2-8 rows by the most tiles a block: M = 8
#   up to 9 (6144x5120 11.4 / 9.9, 12288x5120 16.3 / 15.3, 17408x5120 22.0 / 21.5, 5120x6144 v2_early 11.0 / 10.7),
#   M = 4-7 up to 6 (M = 4: 10240x5120 13.7 / 13.5, 12288x5120 15.4 / 15.2; 14336x5120 17.3 / 17.4), M = 2-3 up to
#   3 (6144x5120 10.0 / 9.8, 5120x6144 v2_early 10.7 / 10.5; 10240x5120 13.3 / 13.4). Not K = 17408 (5120x17408 M = 8:
#   v2_early 21.7 / 28.3: x of 17408 columns through L1).
# - session 25 (device run 3, us, previous pick / own_xg with two sums a warp and 4 chunks in flight): 9-16 rows up to
#   9 tiles a block whatever the imbalance, M = 16: 10240x5120 15.2 / 14.7, 14336x5120 19.7 / 18.8, 16384x5120 nt2_xg
#   21.8 / 20.8, 17408x5120 nt2_xg 23.3 / 22.2, 5120x6144 (imbalance 1.24) nt2_xg 11.9 / 11.9, M = 9 11.5 / 11.1;
#   not 34816x5120 (16.5 tiles a block: nt2 37.7 / 38.4 at M = 16) nor K = 17408 (5120x17408 nt2_xg 22.5 / 25.5).
#   17-24 rows up to 17 tiles a block (device run 5, us, nt3_xg / own_nt3_xg), M = 17 / 24: 6144x5120 14.3 / 12.2,
#   15.0 / 13.4; 5120x6144 14.1 / 13.6, 14.9 / 14.1; 12288x5120 21.2 / 19.2, 22.9 / 21.0; 16384x5120 26.6 / 23.8, (the
#   GEMM from 21 rows, 28.9 at 24 in session 20) 25.9; 17408x5120 27.9 / 25.8, 30.8 / 28.9; 34816x5120 49.3 / 44.6,
#   55.2 / 51.4; not K = 17408 (5120x17408 26.9 / 29.2) nor the LM head (unmeasured; the GEMM takes it).
#   25-32 rows (device run 8, us, ops.linear's wgmma GEMM / own_xg, 3 chunks, one sum), up to 9 tiles a block but
#   where the GEMM's 128-row tiles fill 80-100% of the SMs, M = 25 / 32: 6144x5120 17.5 / 14.9, 17.5 / 15.8;
#   5120x6144 19.0 / 15.7, 19.2 / 17.0; 10240x5120 24.3 / 21.0, 24.5 / 22.6; 17408x5120 36.5 / 32.6, 36.7 / 35.1; not
#   14336x5120 (0.85 of a wave: 28.0 / 27.0, 28.0 / 29.3), 16384x5120 (0.97: 28.4 / 29.2), 34816x5120 (16.5 tiles a
#   block: 59.8 / 62.7 at 32), K = 17408 (33.2 / 39.2).
# - 4-8 rows on weights of WIDE_MAX_CHUNKS fragments or more (the LM head): the 9-16-row stream-K entry, x staged
#   (session 22 device run 5, us, previous pick / nt2: M = 4 v2_early 208.2 / 194.2, M = 8 237.5 / 195.1; not
#   34816x5120: btm 34.6 / 35.4 at M = 8; NT = 1 lost: 228.9 at M = 8, 212.2 with 6 chunks in flight).
MAX_M = 32
STREAM_MAX_M = 24  # the stream-K entries' most rows (_nt3_xg: three n8 tiles); 25-32 rows only own_xg
OWN_XG_MAX_K = 6144
OWN_XG_MIN_TILES = 2.4  # the mean tiles a block from which own_xg was measured
OWN_XG_MAX_TILES = ((8, 9), (4, 6), (2, 3))  # 2-8 rows: (from M rows, the most tiles a block)
OWN_XG_WIDE_MAX_TILES = 9  # 9-16 and 25-32 rows (session 25)
OWN_XG_WIDEST_MAX_TILES = 17  # 17-24 rows (session 25)
SLOT_TILES = {"nvfp4_gemv_sk_own_nt3_xg": 3, "nvfp4_gemv_sk_own_nt4_xg": 4}  # gemv_sk.cu own_body's DYN entries: NT
OWN_XG_GEMM_WAVE = (0.8, 1.0)  # 25-32 rows: not where the GEMM's 128-row tiles fill this share of the SMs
NARROW_STAGED_MIN_M = 4
STAGE_MIN_CHUNKS = 150_000
WIDE_MAX_CHUNKS = 1_000_000
WIDE_TILE_MIN_M = 21
OWN_MAX_TILES = 16
OWN_MAX_IMBALANCE = 1.1


def gemm_wave(p: dict, sms: int) -> float:
    """The share of one wave that the wgmma GEMM's 128-row tiles of weight p fill on `sms` SMs (16384x5120 on 132:
    0.97), where the rules above keep rows on the GEMM."""
    return p["Np"] / 128 / sms


def own_xg(m: int, p: dict, sms: int) -> bool:
    """Block-owned tiles with x read through L1 for m rows (2-32) on weight p over `sms` blocks (the rule above)."""
    t = p["Np"] // 16
    if not 2 <= m <= MAX_M or p["K"] > OWN_XG_MAX_K or t < OWN_XG_MIN_TILES * sms:
        return False
    most = -(-t // sms)
    if m > STREAM_MAX_M:
        low, high = OWN_XG_GEMM_WAVE
        return most <= OWN_XG_WIDE_MAX_TILES and not low <= gemm_wave(p, sms) <= high
    if m > 16:
        return most <= OWN_XG_WIDEST_MAX_TILES
    if m > 8:
        return most <= OWN_XG_WIDE_MAX_TILES
    return most <= next(tiles for rows, tiles in OWN_XG_MAX_TILES if m >= rows)


def narrow_staged(m: int, p: dict) -> bool:
    """4-8 rows on the 9-16-row stream-K entry, x staged: weights of WIDE_MAX_CHUNKS fragments or more."""
    return NARROW_STAGED_MIN_M <= m <= 8 and p["Np"] // 16 * p["Kc"] >= WIDE_MAX_CHUNKS


def kernel_name(m: int, p: dict, sms: int) -> str:
    """The gemv_sk.cu entry for m rows and weight p over `sms` blocks (see the rule above; 25-32 rows only where
    own_xg: `applies` is false elsewhere)."""
    if own_xg(m, p, sms):
        return f"nvfp4_gemv_sk_own_nt{-(-m // 8)}_xg"
    if narrow_staged(m, p):
        return "nvfp4_gemv_sk_nt2"
    if m <= 8:
        return "nvfp4_gemv_sk_own_nt1"
    if m > 16:
        return "nvfp4_gemv_sk_nt3_xg"
    return "nvfp4_gemv_sk_nt2" if p["Np"] // 16 * p["Kc"] >= STAGE_MIN_CHUNKS else "nvfp4_gemv_sk_nt2_xg"


def x_bytes(m: int, p: dict, sms: int) -> int:
    """Dynamic shared memory: x rows of Kc * 64 bf16 plus 8 bytes (own_nt1: each k-step read just in time) or 16
    (the stream-K entries' 16-byte reads); 0 where x is read through L1, but own_nt3_xg's and own_nt4_xg's partial
    slots (48 / 64 KB)."""
    return _x_bytes_of(kernel_name(m, p, sms), m, p)


def _x_bytes_of(name: str, m: int, p: dict) -> int:
    """x_bytes of entry `name` (kernel_name's) for m rows of weight p."""
    if name in SLOT_TILES:  # partial slots in dynamic shared memory: 2 a warp, 32 lanes, NT n8 tiles of 4 f32
        return 2 * WARPS * 32 * SLOT_TILES[name] * 16
    return 0 if "_xg" in name else m * (p["Kc"] * 128 + (8 if name == "nvfp4_gemv_sk_own_nt1" else 16))


def applies(x: torch.Tensor, p: dict, sms: int) -> bool:
    """2 <= M <= STREAM_MAX_M (MAX_M where own_xg), K % 8 == 0, K >= 16, x 16-byte aligned, staged x within
    X_MAX_BYTES (warps with no chunks take part in the staging barrier and then stop)."""
    m = x.shape[0]
    if m > STREAM_MAX_M and not own_xg(m, p, sms):
        return False
    return (2 <= m <= MAX_M and p["K"] % 8 == 0 and p["K"] >= 16 and x.data_ptr() % 16 == 0
            and x_bytes(m, p, sms) <= X_MAX_BYTES)


def chosen(m: int, p: dict, sms: int) -> bool:
    """gemv_pick's shape rule (see above): 9-16 rows always; 25-32 rows where own_xg; 17-24 rows where own_xg, else
    below WIDE_MAX_CHUNKS fragments unless, from WIDE_TILE_MIN_M rows, the weight's 128-row tiles fill 95-100% of the
    SMs; 2-8 rows where own_xg or narrow_staged, else where blocks own at most OWN_MAX_TILES tiles and the busiest at
    most OWN_MAX_IMBALANCE x the mean."""
    t = p["Np"] // 16
    if m > STREAM_MAX_M:
        return own_xg(m, p, sms)
    if m > 16:
        full_wave = m >= WIDE_TILE_MIN_M and 0.95 <= gemm_wave(p, sms) <= 1.0
        return own_xg(m, p, sms) or (t * p["Kc"] < WIDE_MAX_CHUNKS and not full_wave)
    if m > 8 or own_xg(m, p, sms) or narrow_staged(m, p):
        return True
    return -(-t // sms) <= OWN_MAX_TILES and gemv_bt.imbalance(p, sms) <= OWN_MAX_IMBALANCE


@functools.lru_cache(maxsize=None)
def _kernel(name: str):
    kernel = _compile.kernel(os.path.join(ops.HERE, "gemv_sk.cu"), name)
    kernel.max_dynamic_shared_size_bytes = ops.BLOCK_SMEM_MAX - kernel.shared_size_bytes
    return kernel


def _counters(device, np_: int) -> torch.Tensor:
    """int32 [>= Np/64] quad chunk counters, zero between calls (the completing warpgroup re-zeroes its own)."""
    return ops._scratch("sk_counters", device, np_ // 64, torch.int32, True)


def gemv_sk(x: torch.Tensor, p: dict, out: torch.Tensor, pdl: bool = True) -> torch.Tensor:
    """x [M, K] bf16 contiguous, 2 <= M <= MAX_M, p = ops.prepared(...) -> out [M, N] bf16 (written) by
    kernel_name(M, p, SMs): stream-K quads for 9-24 rows (workspace ops._workspace and quad counters, both left
    zero), block-owned tiles for 2-8 and where own_xg; pdl as gemv_bc.gemv_bc. Raises ValueError where `applies`
    is false."""
    import numpy as np

    sms = _compile.num_sms(x.device)
    if not applies(x, p, sms):
        raise ValueError(f"gemv_sk: M={x.shape[0]}, N={p['N']}, K={p['K']}: not served")
    m = x.shape[0]
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    name = kernel_name(m, p, sms)
    own = "_own_" in name  # block-owned tiles: no workspace or counters
    ws, counters = (x, x) if own else (ops._workspace(x.device, p["Np"]), _counters(x.device, p["Np"]))
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), ptr(ws), ptr(counters), ptr(p["alpha"]), np.int32(m),
            np.int32(p["N"]), np.int32(p["K"]), np.int32(p["Np"]), np.int32(p["Kc"]))
    ops._launch("", "", (sms,), (THREADS,), args, _kernel(name), _x_bytes_of(name, m, p), pdl)
    return out


def serves(x: torch.Tensor, p: dict) -> bool:
    """gemv_pick's choice of this kernel: GEMV_SK, Hopper with ops.PDL (measured so), `applies` and `chosen`."""
    if not (GEMV_SK and ops.PDL and x.is_cuda and ops._hopper(x.device)):
        return False
    sms = _compile.num_sms(x.device)
    return applies(x, p, sms) and chosen(x.shape[0], p, sms)
