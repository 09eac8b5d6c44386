"""Worker process (GPU path): fused RMSNorm / gated RMSNorm / SiLU-and-multiply on CUDA bf16 tensors, one CuPy
RawKernel launch each (rmsnorm.cu; its header gives the grid/block mapping and the formulas).

Letters: R rows, D row width, T tokens, I MLP width. Inputs may be row-strided views (the last dim contiguous);
outputs are new contiguous tensors unless given. The plain-torch references are kernels/norm/naive.py.
CuPy and numpy are imported lazily, so this module imports on a machine with neither (CI).
"""
import functools
import os

import torch

from kernels import _compile

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rmsnorm.cu")
MAX_THREADS = 1024
SILU_BLOCK = 256
SILU_MAX_BLOCKS = 132 * 16
MAX_GRID_Y = 65535  # silu_mul_v8 puts the rows on grid y


class NormKernelError(ValueError):
    """A tensor handed to a norm kernel has the wrong dtype, device, shape or layout."""


def supports(*tensors) -> bool:
    """True when the kernels can serve these tensors: all CUDA bf16 (callers fall back to torch otherwise)."""
    return all(t.is_cuda and t.dtype == torch.bfloat16 for t in tensors)


def _rows(t: torch.Tensor, name: str, width: int) -> torch.Tensor:
    """t [R, width] bf16 CUDA with a contiguous last dim (any row stride); a [..., width] tensor is flattened."""
    if not supports(t) or t.shape[-1] != width:
        raise NormKernelError(f"{name} must be a CUDA bfloat16 [..., {width}] tensor, got {t.dtype} {tuple(t.shape)}")
    if t.dim() != 2:
        t = t.reshape(-1, width)
    if width > 1 and t.stride(1) != 1:
        t = t.contiguous()
    return t


@functools.lru_cache(maxsize=None)
def _threads(width: int) -> int:
    """Block size of the row kernels: ~4 columns per thread, a multiple of 32, at most 1024."""
    columns = -(-width // 4)
    return min(MAX_THREADS, max(32, -(-columns // 32) * 32))


def _head_rows(z: torch.Tensor, width: int) -> torch.Tensor:
    """z [..., width] bf16 CUDA as a [T, H, width] view with a contiguous last dim (T the leading dims flattened; a
    2-D z is [R, 1, width]); a copy only where no such view exists."""
    if not supports(z) or z.shape[-1] != width:
        raise NormKernelError(f"z must be a CUDA bfloat16 [..., {width}] tensor, got {z.dtype} {tuple(z.shape)}")
    if z.dim() < 3:
        return _rows(z, "z", width).unsqueeze(1)
    z3 = z.reshape(-1, z.shape[-2], width)
    return z3 if width == 1 or z3.stride(2) == 1 else z3.contiguous()


def _aligned(nbytes: int, *tensors) -> bool:
    """Every given [R, D] bf16 tensor starts on `nbytes` and its row stride is a multiple of nbytes / 2 elements."""
    return all(t is None or (t.data_ptr() % nbytes == 0 and (t.shape[0] <= 1 or t.stride(0) % (nbytes // 2) == 0))
               for t in tensors)



def _launch(name: str, grid, block, args) -> None:
    kernel = _compile.kernel(SOURCE, name)
    kernel(grid, block, args, stream=_compile.current_stream())


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor = None,
             residual_out: torch.Tensor = None):
    """Zero-centred RMSNorm (norm_rms_zc). x [..., D] bf16; weight [D] bf16; residual [..., D] bf16 or None.
    Returns y [..., D] = bf16(x * rsqrt(mean(x^2) + eps) * (1 + w)); with a residual, (y, h) where h = bf16(x +
    residual) is what was normalised (written into residual_out [R, D] contiguous when given, e.g. residual itself)."""
    import numpy as np

    width = x.shape[-1]
    x2 = _rows(x, "x", width)
    w = _rows(weight, "weight", width).reshape(-1)
    if w.numel() != width:
        raise NormKernelError(f"weight must be [{width}]")
    out = torch.empty(x2.shape, dtype=torch.bfloat16, device=x.device)
    res = res_out = None
    if residual is not None:
        res = _rows(residual, "residual", width)
        res_out = torch.empty_like(out) if residual_out is None else residual_out
        if tuple(res_out.shape) != tuple(out.shape) or res_out.stride(1) != 1:
            raise NormKernelError("residual_out must be [R, D] with a contiguous last dim")
    if x2.shape[0]:
        ptr = lambda t: np.uint64(0 if t is None else t.data_ptr())  # noqa: E731
        stride = lambda t: np.int64(0 if t is None else t.stride(0))  # noqa: E731
        args = (ptr(x2), stride(x2), ptr(res), stride(res), ptr(res_out), stride(res_out), ptr(w), ptr(out),
                stride(out), np.int32(width), np.float32(eps))
        if width % 8 == 0 and width <= 8 * MAX_THREADS and _aligned(16, x2, res, res_out, out, w.view(1, -1)):
            _launch("norm_rms_zc_v8", (x2.shape[0],), (max(32, -(-width // 256) * 32),), args)
        else:
            _launch("norm_rms_zc", (x2.shape[0],), (_threads(width),), args)
    y = out.reshape(x.shape)
    return y if residual is None else (y, res_out.reshape(x.shape))


def gated_rms_norm(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Gated RMSNorm (norm_rms_gated). x, z [..., D] bf16 (the same number of D-wide rows); weight [D] bf16.
    Returns [..., D] bf16 (x's shape) = bf16(bf16(w * bf16(x * rsqrt(mean(x^2) + eps))) * silu(z)).
    z of 3 or more dims is read in place as [T, H, D] (_head_rows): the GDN's [T, HV, dv] gate is a column view of
    the fused in_proj output, whose heads cannot be flattened into evenly strided rows without a copy.
    Raises NormKernelError on a wrong dtype, device or shape."""
    import numpy as np

    width = x.shape[-1]
    x2, z3 = _rows(x, "x", width), _head_rows(z, width)
    w = _rows(weight, "weight", width).reshape(-1)
    heads = z3.shape[1]
    if z3.shape[0] * heads != x2.shape[0] or w.numel() != width:
        raise NormKernelError(f"z {tuple(z.shape)} must have the rows of x {tuple(x.shape)}, weight must be [{width}]")
    out = torch.empty(x2.shape, dtype=torch.bfloat16, device=x.device)
    if x2.shape[0]:
        z_args = (np.uint64(z3.data_ptr()), np.int64(z3.stride(0)), np.int64(z3.stride(1) if heads > 1 else 0),
                  np.int32(heads))
        args = (np.uint64(x2.data_ptr()), np.int64(x2.stride(0))) + z_args + (
            np.uint64(w.data_ptr()), np.uint64(out.data_ptr()), np.int64(out.stride(0)), np.int32(width),
            np.float32(eps))
        z_aligned = z3.data_ptr() % 8 == 0 and all(n <= 1 or st % 4 == 0 for n, st in zip(z3.shape[:2], z3.stride()))
        if width % 4 == 0 and z_aligned and _aligned(8, x2, w.view(1, -1)):
            args = args[:-2] + (np.int64(x2.shape[0]),) + args[-2:]
            _launch("norm_rms_gated_w4", (-(-x2.shape[0] // 8),), (256,), args)
        else:
            _launch("norm_rms_gated", (x2.shape[0],), (_threads(width),), args)
    return out.reshape(x.shape)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu_mul: gate, up [..., I] bf16 (same shape; row-strided views allowed) -> [..., I] bf16
    = bf16(bf16(silu(gate)) * up)."""
    import numpy as np

    width = gate.shape[-1]
    g2, u2 = _rows(gate, "gate", width), _rows(up, "up", width)
    if g2.shape != u2.shape:
        raise NormKernelError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} must match")
    out = torch.empty(g2.shape, dtype=torch.bfloat16, device=gate.device)
    total = g2.shape[0] * width
    if total:
        args = (np.uint64(g2.data_ptr()), np.int64(g2.stride(0)), np.uint64(u2.data_ptr()), np.int64(u2.stride(0)),
                np.uint64(out.data_ptr()))
        if width % 8 == 0 and g2.shape[0] <= MAX_GRID_Y and _aligned(16, g2, u2):
            _launch("silu_mul_v8", (-(-width // (8 * SILU_BLOCK)), g2.shape[0]), (SILU_BLOCK,), args + (np.int32(width),))
        else:
            blocks = min(-(-total // SILU_BLOCK), SILU_MAX_BLOCKS)
            _launch("silu_mul", (blocks,), (SILU_BLOCK,), args + (np.int64(g2.shape[0]), np.int32(width)))
    return out.reshape(gate.shape)
