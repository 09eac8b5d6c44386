"""bench/gpu_model's A/B rows: the first variant's decode step again with one part switched off, each switch an env
variable: GPU_MODEL_DECODE_AB=1 (each C with the torch decode attention, then the CUDA-core decode kernels instead of
the tensor-core one), GPU_MODEL_PDL_AB=1 (C = 1, the M = 1 GEMVs launched plainly), GPU_MODEL_TMA_AB=1 (C = 1 on v12's
register stream, kernels/nvfp4/gemv_bt.cu, then on v14's TMA ring again, gemv_btt.cu), GPU_MODEL_AHEAD_AB=1 (C = 1
with v14 issuing every ring stage before x is staged, as before session 23, then again)."""
import os

import torch

from kernels.attention import ops as attention_ops
from kernels.nvfp4 import gemv_btt
from kernels.nvfp4 import ops as nvfp4_ops
from worker.layers import attention as attention_layer

# the paged decode kernel (attention.DECODE_KERNEL "auto": from 8 rows) against the torch gather path ("0")
DECODE_AB = os.environ.get("GPU_MODEL_DECODE_AB", "0") == "1"
PDL_AB = os.environ.get("GPU_MODEL_PDL_AB", "0") == "1"
TMA_AB = os.environ.get("GPU_MODEL_TMA_AB", "0") == "1"
AHEAD_AB = os.environ.get("GPU_MODEL_AHEAD_AB", "0") == "1"


def ab_sweeps(sweep, args: tuple, batches: tuple, label: str) -> list:
    """The first variant again with one part switched off (GPU_MODEL_DECODE_AB: the torch decode attention, then the
    CUDA-core decode kernels instead of the tensor-core one; GPU_MODEL_PDL_AB: C = 1 with the GEMVs launched plainly;
    GPU_MODEL_TMA_AB, GPU_MODEL_AHEAD_AB: as the module's docstring).
    sweep: bench.gpu_model.sweep; args: its leading arguments."""
    rows = []
    if DECODE_AB:
        attention_layer.DECODE_KERNEL = "0"
        torch.cuda.empty_cache()
        rows += sweep(*args, batches, " " + label + " torch-attn")
        attention_layer.DECODE_KERNEL = "auto"
        attention_ops.MMA_ENABLED, mma = False, attention_ops.MMA_ENABLED
        rows += sweep(*args, batches, " " + label + " no-mma-attn")
        attention_ops.MMA_ENABLED = mma
    if PDL_AB:
        nvfp4_ops.PDL = False
        rows += sweep(*args, (1,), " " + label + " no-pdl")
        nvfp4_ops.PDL = True
    if TMA_AB:
        gemv_btt.TMA, tma = False, gemv_btt.TMA
        rows += sweep(*args, (1,), " " + label + " v12")
        gemv_btt.TMA = tma
        rows += sweep(*args, (1,), " " + label + " again")
    if AHEAD_AB:
        gemv_btt.AHEAD_BYTES, ahead = 1 << 30, gemv_btt.AHEAD_BYTES
        rows += sweep(*args, (1,), " " + label + " all-ahead")
        gemv_btt.AHEAD_BYTES = ahead
        rows += sweep(*args, (1,), " " + label + " again")
    return rows
