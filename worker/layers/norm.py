"""Worker process: the two RMSNorms of Qwen3.5, zero-centred (1 + w) and gated (SiLU(z) after the norm)."""
import os

import torch
import torch.nn.functional as F

from kernels.norm import ops as norm_ops

# CUDA bf16: one fused kernel launch per norm (kernels/norm) instead of ~8 torch kernels; verified on the H200
# (run 3, worker/GPU_NOTES.md). SPARKINFER_FUSED_NORMS=0 turns them off; the CPU path never uses them.
USE_KERNELS = os.environ.get("SPARKINFER_FUSED_NORMS", "1") == "1"


class RMSNorm(torch.nn.Module):
    """Zero-centred RMSNorm (transformers `Qwen3_5RMSNorm`, model-spec.md 1.5).

    weight [D] (stored as an offset from 1); x [..., D] -> y [..., D] in x's dtype, computed in fp32:
    y = x * rsqrt(mean(x^2) + eps) * (1 + w). forward(x, residual) normalises h = x + residual (x's dtype) and
    returns (y, h). CUDA bf16 with USE_KERNELS: kernels.norm.ops.rms_norm (one launch, same rounding).
    """

    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor = None):
        """x [T, D] normalised and scaled by (1 + weight) (Qwen3.5's offset RMSNorm); with `residual` [T, D], returns
        (norm(x + residual), x + residual). The fused kernel where it serves, else plain torch in float32."""
        if USE_KERNELS and norm_ops.supports(x, self.weight) and (residual is None or norm_ops.supports(residual)):
            return norm_ops.rms_norm(x, self.weight, self.eps, residual)
        if residual is not None:
            x = x + residual
            return self._norm(x), x
        return self._norm(x)

    def forward_into(self, x: torch.Tensor, residual: torch.Tensor, linear) -> tuple:
        """forward(x, residual) -> (y, h), and where one launch can do both (linear, the layer that reads y first,
        an NVFP4 Linear at one row: Linear.forward_rms_norm) linear(y) computed with it and stashed for linear's
        next call on y (Linear.stash). linear None or no residual: forward alone."""
        if USE_KERNELS and linear is not None and residual is not None:
            fused = linear.forward_rms_norm(x, residual, self.weight, self.eps)
            if fused is not None:
                out, y, h = fused
                linear.stash(y, out)
                return y, h
        return self(x, residual)

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * (1.0 + self.weight.float())).to(x.dtype)


class GatedRMSNorm(torch.nn.Module):
    """RMSNorm then SiLU gate (transformers `Qwen3_5RMSNormGated`, model-spec.md 1.5), plain weight (init 1).

    x, z [..., dv] -> [..., dv] in x's dtype. Rounding follows transformers: the normalised x is cast back to
    x's dtype before the weight multiply, the gate multiply runs in fp32. CUDA bf16 with USE_KERNELS:
    kernels.norm.ops.gated_rms_norm (one launch, same rounding sequence).
    """

    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """RMSNorm of x [.., V] times silu(z) [.., V] (the GDN output gate), in x's dtype; the fused kernel where it
        serves."""
        if USE_KERNELS and norm_ops.supports(x, z, self.weight):
            return norm_ops.gated_rms_norm(x, z, self.weight, self.eps)
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        y = self.weight * xf.to(x.dtype)
        return (y * F.silu(z.float())).to(x.dtype)
