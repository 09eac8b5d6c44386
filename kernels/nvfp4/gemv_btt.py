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


def x_bytes(p: dict) -> int:
    """The staged x: Kp * 256 bytes and 32 zero bytes (the v10 / v12 GEMVs' dynamic shared memory)."""
    return gemv_bc._smem(p)


def ring_stages(p: dict, config: tuple) -> int:
    """R: the ring's stages that fit beside x (at most MAX_RING)."""
    return min(MAX_RING, (SMEM_LIMIT - x_bytes(p)) // (config[0] * PAIR_BYTES))


def fits(p: dict, config: tuple) -> bool:
    """gemv_btt.cu's needs: Kc even, SUB divides Kp, a ring of 2 stages at least."""
    sub = config[1]
    return p["Kc"] % 2 == 0 and (p["Kc"] // 2) % sub == 0 and ring_stages(p, config) >= 2


def choice(p: dict, sms: int) -> "tuple | None":
    """The config ops.gemv runs for an M = 1 weight p that gemv_bt serves, or None (v12's register stream), by tiles
    a block (T / G) and K. H200 session 21 (us, v12 / v14 8_8_16 / 16_4_16 / 16_4_24; bench timing): 6144x5120 9.1 /
    8.3 / 9.5 / 9.1, 5120x6144 9.4 / 8.7 / 10.0 / 9.3, 10240x5120 12.5 / 12.0 / 13.5 / 13.1, 12288x5120 13.9 / 13.5 /
    14.9 / 14.6, 14336x5120 15.4 / 14.9 / 16.4 / 15.7, 16384x5120 17.0 / 16.5 / 17.9 / 17.0, 17408x5120 (8.2 tiles a
    block) 18.2 / 18.8 / 20.0 / 18.7, 34816x5120 30.8 / 30.7 / 30.5 / 29.7, 5120x17408 20.4 / 19.7 / 18.9 / 19.2,
    LM head 248320x5120 183.1 / 187.9 / 171.6 / 166.9."""
    if not TMA:
        return None
    tiles_per_block = p["Np"] // 16 / min(p["Np"] // 16, sms)
    if p["K"] >= 12288:
        config = (16, 4, 16)
    elif tiles_per_block >= 12:
        config = (16, 4, 24)
    elif tiles_per_block < 8:
        config = (8, 8, 16)
    else:
        return None
    return config if fits(p, config) else None


def launch(name: str, p: dict, config: tuple, grid: int, args: tuple, extra: tuple, pdl: bool) -> None:
    """Launch entry nvfp4_gemv_btt{name}_{SP}_{SUB}_{TW} (name: "", "_silu", "_norm", "_gnorm") with gemv_bt's
    arguments: `args` (weight, x, y, alpha, sizes), the ring's stage count, then the mode's `extra`. Raises ValueError
    for a config not compiled or not fitting."""
    import numpy as np

    if config not in CONFIGS or not fits(p, config):
        raise ValueError(f"gemv_btt: config {config} does not serve N={p['N']}, K={p['K']}")
    sp, sub, tw = config
    r = ring_stages(p, config)
    kernel = _kernel(f"nvfp4_gemv_btt{name}_{sp}_{sub}_{tw}")
    smem = r * sp * PAIR_BYTES + x_bytes(p)
    ops._launch("", "", (grid,), (32 * (tw + 1),), args + (np.int32(r),) + extra, kernel, smem, pdl)


@functools.lru_cache(maxsize=None)
def _kernel(name: str):
    kernel = _compile.kernel(os.path.join(ops.HERE, "gemv_btt.cu"), name)
    kernel.max_dynamic_shared_size_bytes = SMEM_LIMIT
    kernel.preferred_shared_memory_carveout = 100
    return kernel
