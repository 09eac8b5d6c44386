"""ops.gemv's choice of GEMV kernel for x [M <= 32, K] bf16 on CUDA, in order (the first that serves):

- "bt": M = 1, gemv_bt.serves (v12 block tiles: Hopper, PDL, tiles spread evenly over the SMs);
- "bc": M = 1, gemv_bc.serves (v10 block columns);
- "sk": 2 <= M <= 32, gemv_sk.serves (v13: 9-24 rows on stream-K quads, 2-8 rows on block-owned tiles where
  they spread evenly, up to 16 a block, 2-32 rows on block-owned tiles with x through L1 on 2.4-17 tiles a block at
  K <= 6144 (gemv_sk.own_xg), 4-8 rows of the LM head on stream-K quads; ops.linear launches it itself for the
  17-32 rows it serves, not the GEMM);
- "btm": 2 <= M <= 16, gemv_btm.serves (v12m: v12's split with v7's decode; 8+ tiles a block, e.g. the fused MLP
  gate+up 34816x5120);
- "bcr": M = 2, gemv_bc.serves_rows, on weights of at least ROWS_MIN_CHUNKS fragments (Np / 16 * Kc);
- "cluster": Hopper, ops.cluster_size finds clusters of 2 blocks a row group that fill a wave (16384x5120,
  14336x5120: the fused GDN and attention input projections);
- "v2_early": 2 <= M <= EARLY_MAX_M on Hopper with PDL: gemv.cu (v7) whose first weight loads go out before
  griddepcontrol.wait, so they overlap the kernel before (x after it);
- "tile": ops.GEMV_VERSION "v5" and gemv_tile.tile_applies (gemv_tile.cu, M <= 8 on weights of up to ~19 MB);
- "v2": gemv.cu as before (split-K over a persistent grid; x staged in shared memory where ops.xs_applies).
H200 session 12 run 13 (bench timing: batches of 10 back-to-back launches with PDL on rotating weight copies; us,
the previous pick / v7 / v7 early): M = 4 6144x5120 11.9 (tile) / 11.9 / 10.8, 5120x6144 11.5 (tile) / 11.5 /
10.6, 17408x5120 23.2 / 23.2 / 22.3, 5120x17408 22.3 / 22.3 / 21.4, LM head 213.7 / 213.2 / 211.7; M = 8 6144x5120
12.1 / 12.1 / 11.0, 17408x5120 23.5 / 23.5 / 22.7; M = 2 6144x5120 11.7 (bcr) / 11.8 / 10.6, 10240x5120 15.3 (bcr)
/ 15.8 / 14.9, 17408x5120 21.7 (bcr) / 23.1 / 22.1, 34816x5120 35.6 (bcr) / 39.8 / 38.2; 16384x5120 M = 4 20.1
(cluster) / 22.2 / 21.4. At M = 16 early loads gain nothing (17408x5120 30.1 / 30.3, 6144x5120 14.2 / 14.3).
"""
import os

import torch

from kernels import _compile
from kernels.nvfp4 import gemv_bc, gemv_bt, gemv_btm, gemv_sk, gemv_tile, ops

EARLY = os.environ.get("SPARKINFER_NVFP4_EARLY", "1") == "1"  # 0: the v7 GEMVs wait at their start, as before
EARLY_MAX_M = 8
ROWS_MIN_CHUNKS = 60_000  # gemv_bcr at M = 2 from here (17408x5120: 87,040); below, v7 early is faster


def choice(x: torch.Tensor, p: dict, variant: str = "") -> str:
    """The kernel ops.gemv runs for x (CUDA, M <= 32) and prepared weight p: one of the names in the module
    docstring. variant (gemv_v2's bench suffixes) always means "v2"."""
    m = x.shape[0]
    if variant or not x.is_cuda:
        return "v2"
    if m == 1 and gemv_bt.serves(x, p):
        return "bt"
    if m == 1 and gemv_bc.serves(x, p):
        return "bc"
    if 2 <= m <= gemv_sk.MAX_M and gemv_sk.serves(x, p):
        return "sk"
    if 2 <= m <= 16 and gemv_btm.serves(x, p):
        return "btm"
    if m == 2 and gemv_bc.serves_rows(x, p) and (p["Np"] // 16) * p["Kc"] >= ROWS_MIN_CHUNKS:
        return "bcr"
    hopper = ops._hopper(x.device)
    if ops.GEMV_CLUSTER and hopper and ops.cluster_size(p, _compile.num_sms(x.device)):
        return "cluster"
    if EARLY and ops.PDL and hopper and 2 <= m <= EARLY_MAX_M:
        return "v2_early"
    if ops.GEMV_VERSION == "v5" and gemv_tile.tile_applies(x, p):
        return "tile"
    return "v2"


def gemv(x: torch.Tensor, p: dict, out: torch.Tensor, variant: str = "", blocks_per_sm: int = 2) -> torch.Tensor:
    """Runs choice(x, p, variant) -> out [M, N] bf16 (written); variant and blocks_per_sm go to gemv_v2."""
    kind = choice(x, p, variant)
    if kind == "bt":
        return gemv_bt.gemv_bt(x, p, out, **gemv_bt.dispatch(x, p))
    if kind == "bc":
        return gemv_bc.gemv_bc(x, p, out, unroll=gemv_bc.dispatch_unroll(p))
    if kind == "sk":
        return gemv_sk.gemv_sk(x, p, out)
    if kind == "btm":
        return gemv_btm.gemv_btm(x, p, out)
    if kind == "bcr":
        return gemv_bc.gemv_bcr(x, p, out)
    if kind == "cluster":
        return ops.gemv_cluster(x, p, out, ops.cluster_size(p, _compile.num_sms(x.device)))
    if kind == "tile":
        return gemv_tile.gemv_tile(x, p, out)
    return ops.gemv_v2(x, p, out, variant, blocks_per_sm, early=kind == "v2_early")
