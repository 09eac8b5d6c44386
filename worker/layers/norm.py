"""Worker process: the two RMSNorms of Qwen3.5, zero-centred (1 + w) and gated (SiLU(z) after the norm)."""
import torch
import torch.nn.functional as F


class RMSNorm(torch.nn.Module):
    """Zero-centred RMSNorm (transformers `Qwen3_5RMSNorm`, model-spec.md 1.5).

    weight [D] (stored as an offset from 1); x [..., D] -> y [..., D] in x's dtype, computed in fp32:
    y = x * rsqrt(mean(x^2) + eps) * (1 + w).
    """

    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * (1.0 + self.weight.float())).to(x.dtype)


class GatedRMSNorm(torch.nn.Module):
    """RMSNorm then SiLU gate (transformers `Qwen3_5RMSNormGated`, model-spec.md 1.5), plain weight (init 1).

    x, z [..., dv] -> [..., dv] in x's dtype. Rounding follows transformers: the normalised x is cast back to
    x's dtype before the weight multiply, the gate multiply runs in fp32.
    """

    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        y = self.weight * xf.to(x.dtype)
        return (y * F.silu(z.float())).to(x.dtype)
