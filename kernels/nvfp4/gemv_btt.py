"""Launcher pieces of gemv_btt.cu (v14, "block tiles, TMA ring"): v12's M = 1 GEMV (gemv_bt.py) with the block's
weight slice streamed into a shared-memory ring by TMA bulk copies (method: gemv_btt.cu's header). gemv_bt.gemv_bt
launches it where `config` names a ring shape for the weight.

Letters as gemv_bt.py: T = Np / 16 tiles, Kc chunks, Kp = Kc / 2 chunk pairs, G = min(T, SMs) blocks. A config is
(SP, SUB, TW): SP chunk pairs a stage (one bulk copy of fragments and one of scale words), SUB pairs an item of a
compute warp, TW compute warps (plus one producer warp).
"""
import functools
import os

from kernels import _compile
from kernels.nvfp4 import gemv_bc, ops

TMA = os.environ.get("SPARKINFER_NVFP4_TMA", "1") == "1"  # 0: every M = 1 GEMV on v12's register stream
CONFIGS = ((16, 4, 16), (8, 8, 16), (16, 4, 24))  # compiled (gemv_btt.cu BTT_KERNELS)
PAIR_BYTES = 1152  # gemv_btt.cu BTT_PAIR_BYTES
MAX_RING = 48  # gemv_btt.cu BTT_MAX_RING
# dynamic shared memory a block may take: the 227 KB opt-in limit of sm_90 less the kernel's static 9.2 KB
SMEM_LIMIT = 227 * 1024 - 10 * 1024
# weight bytes a block issues before x is staged, the rest after (gemv_btt.cu's header): H200 session 23, us for P
# stages of 8_8_16 (9.2 KB each) 1 / 2 / 4 / 6 / 8 / 12 / all: 12288x5120 22.0 / 12.8 / 12.7 / 12.6 / 12.8 / 13.2 /
# 14.3, 10240x5120 11.5 / 11.4 / 11.2 / 11.2 / 11.2 / 11.5 / 12.5; 16_4_24 (18.4 KB) on 17408x5120 at P = 3: 16.9 (all:
# 19.5); ~55 KB, about what the memory system streams to a block during the wait for the kernel before and x's loads
AHEAD_BYTES = int(os.environ.get("SPARKINFER_NVFP4_TMA_AHEAD", str(55 * 1024)))


def x_bytes(p: dict) -> int:
    """The staged x: Kp * 256 bytes and 32 zero bytes (the v10 / v12 GEMVs' dynamic shared memory)."""
    return gemv_bc._smem(p)


def ring_stages(p: dict, config: tuple) -> int:
    """R: the ring's stages that fit beside x (at most MAX_RING)."""
    return min(MAX_RING, (SMEM_LIMIT - x_bytes(p)) // (config[0] * PAIR_BYTES))


def stages_ahead(config: tuple) -> int:
    """P: the ring stages (config[0] chunk pairs each) issued before x is staged, AHEAD_BYTES rounded, at least 1."""
    return max(1, round(AHEAD_BYTES / (config[0] * PAIR_BYTES)))


def fits(p: dict, config: tuple) -> bool:
    """gemv_btt.cu's needs: Kc even, SUB divides Kp, a ring of 2 stages at least."""
    sub = config[1]
    return p["Kc"] % 2 == 0 and (p["Kc"] // 2) % sub == 0 and ring_stages(p, config) >= 2


def choice(p: dict, sms: int) -> "tuple | None":
    """The config ops.gemv runs for an M = 1 weight p that gemv_bt serves, or None (v12's register stream), by tiles
    a block (T / G) and K. H200 session 23 (us, v12 / v14 8_8_16 / 16_4_16 / 16_4_24, AHEAD_BYTES 55 KB; bench
    timing): 6144x5120 9.1 / 7.8 / 8.2 / 7.9, 5120x6144 9.4 / 8.5 / 8.3 / 8.2, 10240x5120 12.5 / 10.9 / 11.3 / 10.8,
    12288x5120 13.8 / 12.2 / 12.4 / 12.2, 14336x5120 15.3 / 13.7 / 13.9 / 13.7, 16384x5120 (7.8 tiles a block) 17.0 /
    15.4 / 15.3 / 15.0, 17408x5120 18.1 / 16.9 / 16.5 / 16.2, 34816x5120 30.6 / 29.0 / 27.7 / 27.3, 5120x17408 20.3 /
    18.7 / 17.9 / 18.1, LM head 248320x5120 182.8 / 185.8 / 166.9 / 165.6."""
    if not TMA:
        return None
    tiles_per_block = p["Np"] // 16 / min(p["Np"] // 16, sms)
    if p["K"] >= 12288:
        config = (16, 4, 16)
    elif tiles_per_block >= 7:
        config = (16, 4, 24)
    else:
        config = (8, 8, 16)
    return config if fits(p, config) else None


def launch(name: str, p: dict, config: tuple, grid: int, args: tuple, extra: tuple, pdl: bool) -> None:
    """Launch entry nvfp4_gemv_btt{name}_{SP}_{SUB}_{TW} (name: "", "_silu", "_norm", "_gnorm") with gemv_bt's
    arguments: `args` (weight, x, y, alpha, sizes), the ring's stage count, the stages issued before x (stages_ahead),
    then the mode's `extra`. Raises ValueError for a config not compiled or not fitting."""
    import numpy as np

    if config not in CONFIGS or not fits(p, config):
        raise ValueError(f"gemv_btt: config {config} does not serve N={p['N']}, K={p['K']}")
    sp, sub, tw = config
    r = ring_stages(p, config)
    kernel = _kernel(f"nvfp4_gemv_btt{name}_{sp}_{sub}_{tw}")
    smem = r * sp * PAIR_BYTES + x_bytes(p)
    ring_args = (np.int32(r), np.int32(stages_ahead(config)))
    ops._launch("", "", (grid,), (32 * (tw + 1),), args + ring_args + extra, kernel, smem, pdl)


@functools.lru_cache(maxsize=None)
def _kernel(name: str):
    kernel = _compile.kernel(os.path.join(ops.HERE, "gemv_btt.cu"), name)
    kernel.max_dynamic_shared_size_bytes = SMEM_LIMIT
    kernel.preferred_shared_memory_carveout = 100
    return kernel
