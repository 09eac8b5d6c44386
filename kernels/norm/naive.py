"""Plain-torch references of kernels/norm (any device): the rounding sequence of the torch code in
worker/layers/norm.py and mlp.py, which follows transformers (model-spec.md 1.5).

Letters: R rows (tokens, or token x head for the per-head norms), D row width, T tokens, I MLP width.
"""
import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor = None):
    """Zero-centred RMSNorm. x [R, D] bf16; weight [D] (offset from 1); residual [R, D] or None.
    y = (x * rsqrt(mean(x^2) + eps) * (1 + w)) in f32, cast to x's dtype; with a residual, x := x + residual
    (in x's dtype) first. Returns y, or (y, x + residual) with a residual."""
    if residual is not None:
        x = x + residual
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = (xf * (1.0 + weight.float())).to(x.dtype)
    return y if residual is None else (y, x)


def gated_rms_norm(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Gated RMSNorm. x, z [R, D]; weight [D] (plain). xn = (x * rsqrt(mean(x^2) + eps)).to(x.dtype);
    y = weight * xn (in x's dtype); out = (y * silu(z.float())).to(x.dtype)."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = weight * xf.to(x.dtype)
    return (y * F.silu(z.float())).to(x.dtype)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """gate, up [T, I] -> silu(gate) * up, each op rounded to the inputs' dtype (as on bf16 tensors)."""
    return F.silu(gate) * up
