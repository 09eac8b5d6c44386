"""Worker process: the on/off SPARKINFER_* variables that worker/ and kernels/ read where they are used, checked once
at start."""
from typing import Mapping, Optional

# Each is on only when it is "1" (SPARKINFER_DECODE_MMA: off only when "0"), read at import or first use; README's
# Configuration table lists them.
SWITCHES = (
    "SPARKINFER_CUDA_GRAPHS", "SPARKINFER_PREFILL_GRAPHS", "SPARKINFER_CAPTURE_AT_START", "SPARKINFER_FUSED_NORMS",
    "SPARKINFER_NVFP4_PDL", "SPARKINFER_NVFP4_BC", "SPARKINFER_NVFP4_BT", "SPARKINFER_NVFP4_TMA",
    "SPARKINFER_NVFP4_EARLY", "SPARKINFER_NVFP4_BTM", "SPARKINFER_NVFP4_SK", "SPARKINFER_NVFP4_SILU_X",
    "SPARKINFER_NVFP4_NORM_X", "SPARKINFER_NVFP4_GNORM_X", "SPARKINFER_NVFP4_CLUSTER", "SPARKINFER_NVFP4_XS",
    "SPARKINFER_GDN_PDL", "SPARKINFER_DECODE_MMA", "SPARKINFER_NVFP4_WGMMA", "SPARKINFER_NVFP4_WS",
    "SPARKINFER_NVFP4_WSB", "SPARKINFER_NVFP4_SMALL_SK", "SPARKINFER_NVFP4_WS_SK", "SPARKINFER_ATTN_PROLOGUE",
    "SPARKINFER_DENSE_GEMV", "SPARKINFER_DENSE_PDL",
)
# The worker's CUDA kernel choices that take a value (kernels/gdn/_decode.py, kernels/nvfp4/gemv_btt.py and ops.py).
CUDA_CHOICES = ("SPARKINFER_GDN_DECODE_BF16", "SPARKINFER_GDN_DECODE_F32", "SPARKINFER_NVFP4_TMA_AHEAD",
                "SPARKINFER_NVFP4_WGMMA_MIN_M")
# worker/layers/attention.py's decode attention choice: auto, or 1 / 0 to force the kernels on / off.
PAGED_DECODE = ("SPARKINFER_PAGED_DECODE", ("auto", "1", "0"))


def switch_problem(environ: Mapping[str, str]) -> Optional[str]:
    """The line naming the first switch set to another value than 0 or 1, else None: SPARKINFER_CUDA_GRAPHS=true
    turned the graphs off, and SPARKINFER_DECODE_MMA=false left the kernels on, without a word."""
    for name in SWITCHES:
        if name in environ and environ[name] not in ("0", "1"):
            return f"{name}={environ[name]!r} is not a switch: 1 turns it on, 0 off"
    name, accepted = PAGED_DECODE
    if name in environ and environ[name] not in accepted:
        return f"{name}={environ[name]!r} is not one of {', '.join(accepted)}"
    return None
