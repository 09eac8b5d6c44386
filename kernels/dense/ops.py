"""Worker process (GPU path): the skinny bf16 GEMV (gemv.cu) for dense Linears at decode, and when it serves.

y [M, N] = x [M, K] @ w [N, K]^T in bf16 with f32 accumulation, M <= MAX_M rows, one CuPy RawKernel launch
(programmatic dependent launch on Hopper, kernels/_pdl.py). The reference is torch.nn.functional.linear; the
kernel's summation order differs from cuBLAS's (gemv.cu's header), so outputs agree to bf16 rounding, not bit for bit.
CuPy and numpy are imported lazily, so this module imports on a machine with neither (CI).
"""
import os

import torch

from kernels import _compile, _pdl

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gemv.cu")
THREADS, VPT, MAX_M = 128, 8, 8  # gemv.cu's block size, 16-byte vectors per thread and rows per launch
MAX_K = THREADS * VPT * 8
# rows from which cuBLAS is the faster path: H200, `python3 -m bench.gpu_dense_gemv` (2026-11-30, device run 1), us
# ours / torch at 96x5120: M = 1 3.2 / 7.2, 2 4.2 / 7.0, 4 6.3 / 7.1, 8 10.9 / 7.1 (every row's x is re-read per block)
DISPATCH_MAX_M = 4
# weights up to this many elements go to the kernel (the GDN gates [b; a] of the 27B shape: 96 x 5120); larger
# ones stay with cuBLAS until the bench (bench/gpu_dense_gemv.py) shows where the kernel wins
MAX_WEIGHT_NUMEL = 1 << 21
PDL = os.environ.get("SPARKINFER_DENSE_PDL", "1") == "1"
ENABLED = os.environ.get("SPARKINFER_DENSE_GEMV", "1") == "1"


def serves(x: torch.Tensor, weight: torch.Tensor, max_numel: int = MAX_WEIGHT_NUMEL,
           max_rows: int = DISPATCH_MAX_M) -> bool:
    """True when gemv() should compute F.linear(x, weight): both CUDA bf16 on one device, x [..., K] with at most
    max_rows rows (the kernel takes up to MAX_M; from DISPATCH_MAX_M + 1 cuBLAS is faster), weight [N, K] with a
    contiguous last dim, K % 8 == 0, K <= MAX_K, 16-byte aligned rows, and at most `max_numel` weight elements."""
    if not (ENABLED and x.is_cuda and x.dtype == torch.bfloat16 and weight.dtype == torch.bfloat16):
        return False
    n, k = weight.shape
    rows = x.numel() // max(1, k)
    return (x.device == weight.device and x.shape[-1] == k and 0 < rows <= max_rows and k % 8 == 0 and k <= MAX_K
            and weight.stride(1) == 1 and weight.stride(0) % 8 == 0 and weight.data_ptr() % 16 == 0
            and n * k <= max_numel)


def gemv(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor = None) -> torch.Tensor:
    """x [..., K] bf16 CUDA (at most MAX_M rows), weight [N, K] bf16 -> y [..., N] bf16 = bf16(x @ weight^T), f32
    accumulation; written into `out` ([M, N] bf16, contiguous last dim) when given. Raises ValueError when
    serves(x, weight, any size) is False or `out` has the wrong shape."""
    import numpy as np

    if not serves(x, weight, max_numel=weight.numel(), max_rows=MAX_M):
        raise ValueError(f"dense gemv: cannot serve x {tuple(x.shape)} {x.dtype} with weight "
                         f"{tuple(weight.shape)} {weight.dtype} (at most {MAX_M} rows, K % 8 == 0, K <= {MAX_K})")
    n, k = weight.shape
    x2 = x.reshape(-1, k)
    if x2.stride(-1) != 1 or x2.stride(0) % 8 or x2.data_ptr() % 16:
        x2 = x2.contiguous()
    if out is None:
        out = torch.empty(x2.shape[0], n, dtype=torch.bfloat16, device=x.device)
    elif tuple(out.shape) != (x2.shape[0], n) or out.dtype != torch.bfloat16 or out.stride(1) != 1:
        raise ValueError(f"dense gemv: out must be [{x2.shape[0]}, {n}] bf16 with a contiguous last dim")
    args = (np.uint64(weight.data_ptr()), np.int64(weight.stride(0)), np.uint64(x2.data_ptr()),
            np.int64(x2.stride(0)), np.uint64(out.data_ptr()), np.int64(out.stride(0)), np.int32(x2.shape[0]),
            np.int32(k))
    _pdl.launch_on_stream(_compile.kernel(SOURCE, "gemv_bf16_rows"), (n,), (THREADS,), args,
                          pdl=PDL and _pdl.supported())
    return out.reshape(*x.shape[:-1], n)
