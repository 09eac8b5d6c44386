"""Worker process: the dense SwiGLU MLP."""
import torch
import torch.nn.functional as F

from worker.layers.linear import Linear


class MLP(torch.nn.Module):
    """y = down(silu(gate(x)) * up(x)) (transformers `Qwen3_5MLP`). x [T, D] -> [T, D]; gate/up [I, D], down [D, I]."""

    def __init__(self, gate_proj: Linear, up_proj: Linear, down_proj: Linear):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = gate_proj, up_proj, down_proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
