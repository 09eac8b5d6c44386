"""Which (tile, split-K) the wgmma NVFP4 GEMM (gemm_wgmma.py) launches: the tiles it is built with and pick's cost
model of the busiest SM, fitted to device sweeps (kernels/nvfp4/NOTES.md: session 2 for T = 64 / 128 / 256, session 9
for T = 32). CPU only: no GPU call here. pick, pick_tile and best_splits are pure functions of their integer arguments
and this module's constants, and memoised: every prefill step asks the same few hundred questions (an eager 64-layer
step runs ~770 GEMMs, and the cost model took ~40 us of host time a call; session 18).
"""
import functools

MEMO = 1 << 16  # memoised answers kept per function (M up to a few thousand x the weight shapes of a model)
TILE_ROWS = 128  # weight rows per block
# T tokens per block -> (cp.async stages, resident blocks per SM the kernel is built for)
# (T = 32: 3 blocks of 8 stages beat 2 of 12 by 1-9% where a grid has blocks for 3; T = 64 with 8 stages against 6:
# within 1-2%; session 9)
TILES = {32: (8, 3), 64: (8, 2), 128: (6, 1), 256: (5, 1)}
SMALL_TILE_MAX_M = 32  # up to this many rows pick takes T = 32 (device run 6: it beat T = 64 at every M <= 32 timed)
# bench A/B rings (gemm_wgmma's diag): name suffix -> (T, stages, blocks per SM); correct results, split-K too
RING_VARIANTS = {"_s6": (64, 6, 2)}
# T = 32's cost model: chunks a SM retires per us with 1, 2, 3 resident blocks (session 9 device run 7, M = 24 / 32:
# 16384x5120 S = 1 33.4 us for 80 chunks alone; 34816x5120 S = 1-3 and the LM head S = 1 at 3.3-3.7 with 3)
T32_CHUNKS_PER_US = (2.4, 3.0, 3.5)
T32_SPLIT_US, T32_RED_US_PER_MB = 3.0, 0.15  # its split-K costs (34816x5120 S = 2 / 3: 3.5-4.2 us over the rest)
# throughput of a tile relative to T = 256 (decode, barriers and copies per MMA grow as T shrinks), measured at
# M = 8192 on the layer shapes (run 2: T = 128 0.73, T = 64 0.59); pick_tile only
TILE_EFFICIENCY = {32: 0.4, 64: 0.6, 128: 0.73, 256: 1.0}
# split-K: S in SPLITS (the values bench/gpu_wgmma.py sweeps), S <= Kc / MIN_SPLIT_CHUNKS; considered only where the
# S = 1 grid fills under SPLIT_WAVES waves (num_sms x resident blocks per SM), up to about SPLIT_WAVES waves of blocks
SPLITS = (2, 3, 4, 5, 6, 8, 10, 12, 16)
MIN_SPLIT_CHUNKS = 8
SPLIT_WAVES = 2
# ... per tile where its sweep says otherwise: T = 64's grids at M = 33-64 gain from S = 3-4 on 34816x5120 (session 10
# run 1: 77.0-81.5 us against 93.6-94.3 at S = 1 and 81.4-83.4 at S = 2, the most two waves allow)
TILE_SPLIT_WAVES = {64: 3}
# pick's cost model of the busiest SM, us, fitted to the first split-K sweep of 2026-11-29 (bench/gpu_wgmma.py: 229
# (shape, M = 64 / 128 / 512, T, S) times, mean abs error 3.3%): one 64-k chunk of a block alone on its SM; one
# chunk of each of two T = 64 blocks sharing one (barely more throughput than alone at these M); split-K's fixed
# cost (flush chain, read-back) and its red.global.add traffic, S x Np x M x 4 bytes (~1.7 TB/s: M = 512 splits of
# T = 256 tiles lose by it)
CHUNK_US = {64: 0.461, 128: 0.557, 256: 0.811}
PAIR_CHUNK_US = 0.711
SPLIT_US = 4.0
RED_US_PER_MB = 0.603
# split-K's fixed cost and reduction cost per MB where a tile has its own fit: T = 32 (above); T = 64 and its chunk
# times refitted to session 10's sweep (device run 1: 240 (shape, M = 33 .. 128, S) times, mean abs error 3.5%,
# 8.1% with the first fit's constants, which priced 34816x5120 M = 40 at S = 1 94 us against S = 4 77 us)
SPLIT_COSTS = {32: (T32_SPLIT_US, T32_RED_US_PER_MB), 64: (8.34, 0.184)}
# split-K only where the model says it is this much faster than S = 1: on both sweeps of 2026-11-29 (690 times, M =
# 33 .. 8192 on the layer shapes) no pick is slower than S = 1 and none over 1.10x the fastest (T, S) timed; at 0.05,
# 10240x5120 M = 100 took 128x3, 3% slower than 128x1
SPLIT_GAIN = 0.08


@functools.lru_cache(maxsize=MEMO)
def pick_tile(m: int, np_: int, num_sms: int = 132) -> int:
    """T minimising (blocks per SM, rounded up) x T / efficiency: the busiest SM's work. Small T only where few
    big blocks would leave SMs idle (run 2: the pick was the fastest tile on 27 of 28 shape x M points, 1.4% off on
    the last)."""
    def cost(t):
        blocks = (np_ // TILE_ROWS) * -(-m // t)
        return -(-blocks // num_sms) * t / TILE_EFFICIENCY[t]
    if m <= SMALL_TILE_MAX_M:
        return 32
    return min((t for t in TILES if t > 32), key=lambda t: (cost(t), -t))


def _busiest_sm_us(tile: int, splits: int, m: int, np_: int, kc: int, num_sms: int) -> float:
    """pick's cost model (CHUNK_US ..): us of the SM with the most blocks, plus split-K's costs; no fixed part."""
    blocks = (np_ // TILE_ROWS) * -(-m // tile) * splits
    per_sm, chunks = -(-blocks // num_sms), -(-kc // splits)
    if tile == 32:
        us = per_sm * chunks / T32_CHUNKS_PER_US[min(per_sm, 3) - 1]
    elif TILES[tile][1] == 2:  # resident in pairs; an odd block runs alone
        us = (per_sm // 2) * chunks * PAIR_CHUNK_US + (per_sm % 2) * chunks * CHUNK_US[tile]
    else:
        us = per_sm * chunks * CHUNK_US[tile]
    if splits > 1:
        fixed, per_mb = SPLIT_COSTS.get(tile, (SPLIT_US, RED_US_PER_MB))
        us += fixed + splits * np_ * -(-m // 8) * 8 * 4 / 1e6 * per_mb
    return us


def split_choices(tile: int, m: int, np_: int, kc: int, num_sms: int = 132) -> list:
    """S > 1 values pick considers for tile T: none where the S = 1 grid fills its waves (TILE_SPLIT_WAVES, else
    SPLIT_WAVES), else the SPLITS up to about that many waves of blocks and Kc / MIN_SPLIT_CHUNKS."""
    waves = TILE_SPLIT_WAVES.get(tile, SPLIT_WAVES)
    blocks, slots = (np_ // TILE_ROWS) * -(-m // tile), waves * num_sms * TILES[tile][1]
    if blocks >= slots:
        return []
    return [s for s in SPLITS if s <= min(kc // MIN_SPLIT_CHUNKS, -(-slots // blocks))]


@functools.lru_cache(maxsize=MEMO)
def best_splits(tile: int, m: int, np_: int, kc: int, num_sms: int = 132) -> int:
    """S for tile T: the cheapest split if it beats S = 1 by SPLIT_GAIN in the model, else 1."""
    cost = lambda s: _busiest_sm_us(tile, s, m, np_, kc, num_sms)  # noqa: E731
    splits = min(split_choices(tile, m, np_, kc, num_sms), key=cost, default=1)
    return splits if cost(splits) < (1 - SPLIT_GAIN) * cost(1) else 1


@functools.lru_cache(maxsize=MEMO)
def pick(m: int, np_: int, kc: int, num_sms: int = 132) -> tuple:
    """-> (T, S): pick_tile's T with S = 1 unless a split (T, S > 1) costs SPLIT_GAIN less in the model."""
    best = (pick_tile(m, np_, num_sms), 1)
    base = cost = _busiest_sm_us(*best, m, np_, kc, num_sms)
    for tile in ((32,) if m <= SMALL_TILE_MAX_M else (t for t in TILES if t > 32)):
        for splits in split_choices(tile, m, np_, kc, num_sms):
            c = _busiest_sm_us(tile, splits, m, np_, kc, num_sms)
            if c < cost and c < (1 - SPLIT_GAIN) * base:
                best, cost = (tile, splits), c
    return best
