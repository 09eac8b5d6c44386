"""Worker process: the dense SwiGLU MLP."""
import torch
import torch.nn.functional as F

from kernels.norm import ops as norm_ops
from worker.layers import norm
from worker.layers.fused import fuse
from worker.layers.linear import Linear


class MLP(torch.nn.Module):
    """y = down(silu(gate(x)) * up(x)) (transformers `Qwen3_5MLP`). x [T, D] -> [T, D]; gate/up [I, D], down [D, I].
    CUDA bf16 with worker.layers.norm.USE_KERNELS: silu(gate) * up in one launch (kernels.norm.ops.silu_mul), or at
    one row on Hopper none: the down projection's GEMV stages silu(gate) * up itself (Linear.forward_silu_mul)."""

    def __init__(self, gate_proj: Linear, up_proj: Linear, down_proj: Linear):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = gate_proj, up_proj, down_proj
        self.gate_up_proj = None

    def fuse_projections(self) -> bool:
        """Replaces gate_proj and up_proj by one Linear (rows [gate; up]): one GEMV launch instead of two (H200,
        27B shape, M = 1: 39.9 vs 50.2 us, kernels/nvfp4/NOTES.md session 3); True when fused."""
        fused = fuse([self.gate_proj, self.up_proj])
        if fused is None:
            return False
        self.gate_up_proj, self.gate_proj, self.up_proj = fused, None, None
        return True

    @property
    def input_linear(self):
        """The Linear that reads the MLP's input first, for RMSNorm.forward_into."""
        return self.gate_proj if self.gate_up_proj is None else self.gate_up_proj.linears[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [T, D] -> [T, D]: down(silu(gate(x)) * up(x)), fused into the down projection's GEMV where the kernels
        serve."""
        if self.gate_up_proj is None:
            gate, up = self.gate_proj(x), self.up_proj(x)
        else:  # column views of the one output
            gate, up = self.gate_up_proj(x)
        if norm.USE_KERNELS and norm_ops.supports(gate, up):
            fused = self.down_proj.forward_silu_mul(gate, up)
            return fused if fused is not None else self.down_proj(norm_ops.silu_mul(gate, up))
        return self.down_proj(F.silu(gate) * up)
