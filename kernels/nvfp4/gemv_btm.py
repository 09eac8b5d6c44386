"""Launcher of gemv_btm.cu (v12m, "block tiles" for 2..16 rows): v7's decode with x staged in shared memory and
its first weight loads before griddepcontrol.wait, on v12's split (one 16-warp block per SM owning whole 16-row
tiles: no split-K reduction through memory). Method: gemv_btm.cu's header; letters as gemv_bt.py.
"""
import functools
import os

import torch

from kernels import _compile
from kernels.nvfp4 import gemv_bt, ops

# gemv_pick sends 2..16 rows here where blocks own at least MIN_TILES_PER_BLOCK tiles and the busiest at most
# MAX_IMBALANCE x the mean; with fewer tiles a block v7 is faster from 4 rows. H200 session 12 run 16 (us, previous
# pick / v12m at M = 2, 4, 8, 16): 34816x5120 (16.5 tiles a block) 35.5 / 32.7, 39.9 / 33.5, 39.3 / 34.8, 53.0 /
# 44.9; 17408x5120 (8.2) 21.7 / 20.4, 22.3 / 21.0, 22.7 / 22.3, 30.0 / 28.9; 16384x5120 (7.8) 19.9 / 19.0, 20.0 /
# 19.8, 20.2 / 21.0, 25.3 / 25.8; 6144x5120 (2.9) 10.7 / 10.1, 10.8 / 11.0, 11.2 / 12.3, 14.2 / 17.0.
GEMV_BTM = os.environ.get("SPARKINFER_NVFP4_BTM", "1") == "1"
MIN_TILES_PER_BLOCK = 8
MAX_IMBALANCE = 1.1
MAX_TILES = 24  # gemv_btm.cu BTM_MAX_TILES
STATIC_SMEM = (1024 + 4 * MAX_TILES * 16 * 16 + 4 * MAX_TILES) + 256  # lut, sums at NT = 2, split flags, slack
X_MAX_BYTES = ops.BLOCK_SMEM_MAX - STATIC_SMEM  # x staged as [M, Kc * 64] bf16


def x_bytes(m: int, p: dict) -> int:
    """Dynamic shared memory: x rows of Kc * 64 bf16."""
    return m * p["Kc"] * 128


def applies(x: torch.Tensor, p: dict, sms: int) -> bool:
    """2 <= M <= 16, K % 8 == 0, K >= 16, x 16-byte aligned and staged in X_MAX_BYTES, at most MAX_TILES tiles and
    at least 16 chunks a block."""
    t, g, m = p["Np"] // 16, gemv_bt.blocks(p, sms), x.shape[0]
    return (2 <= m <= 16 and p["K"] % 8 == 0 and p["K"] >= 16 and x.data_ptr() % 16 == 0
            and x_bytes(m, p) <= X_MAX_BYTES and -(-t // g) <= MAX_TILES and (t // g) * p["Kc"] >= gemv_bt.WARPS)


@functools.lru_cache(maxsize=None)
def _kernel(name: str):
    kernel = _compile.kernel(os.path.join(ops.HERE, "gemv_btm.cu"), name)
    kernel.max_dynamic_shared_size_bytes = X_MAX_BYTES
    return kernel


def gemv_btm(x: torch.Tensor, p: dict, out: torch.Tensor, pdl: bool = True) -> torch.Tensor:
    """x [M, K] bf16 contiguous, 2 <= M <= 16, p = ops.prepared(...) -> out [M, N] bf16 (written); NT = 1 n8 tile of
    x rows for M <= 8 (6 chunks a half-buffer), 2 above (4). pdl as gemv_bc.gemv_bc. Raises ValueError where
    `applies` is false."""
    import numpy as np

    sms = _compile.num_sms(x.device)
    if not applies(x, p, sms):
        raise ValueError(f"gemv_btm: M={x.shape[0]}, N={p['N']}, K={p['K']}: not served")
    m = x.shape[0]
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsc"]), ptr(x), ptr(out), ptr(p["alpha"]), np.int32(m), np.int32(p["N"]),
            np.int32(p["K"]), np.int32(p["Np"]), np.int32(p["Kc"]))
    kernel = _kernel(f"nvfp4_gemv_btm_nt{1 if m <= 8 else 2}")
    ops._launch("", "", (gemv_bt.blocks(p, sms),), (32 * gemv_bt.WARPS,), args, kernel, x_bytes(m, p), pdl)
    return out


def serves(x: torch.Tensor, p: dict) -> bool:
    """gemv_pick's choice of this kernel: GEMV_BTM, Hopper with ops.PDL (measured so), `applies`, at least
    MIN_TILES_PER_BLOCK tiles a block and imbalance <= MAX_IMBALANCE."""
    if not (GEMV_BTM and ops.PDL and x.is_cuda and ops._hopper(x.device)):
        return False
    sms = _compile.num_sms(x.device)
    t, g = p["Np"] // 16, gemv_bt.blocks(p, sms)
    return applies(x, p, sms) and t >= MIN_TILES_PER_BLOCK * g and gemv_bt.imbalance(p, sms) <= MAX_IMBALANCE
