"""Worker process: a bias-free linear layer built from checkpoint tensors (the one place weight formats plug in)."""
import torch

from kernels.nvfp4 import ops as nvfp4_ops
from kernels.nvfp4.checkpoint import NVFP4Weight, from_tensors as nvfp4_from_tensors


class Linear(torch.nn.Module):
    """y = x W^T. weight [out_features, in_features]; x [..., in_features] -> y [..., out_features] in x's dtype.

    Built from tensors, never initialised: `Linear(weight)` or `Linear.from_weights({"weight": W}, dtype)`.
    NVFP4: `Linear(NVFP4Weight)` (kernels.nvfp4.checkpoint) keeps the 4-bit weight; forward runs the CUDA kernels on
    GPU and the naive dequantize path on CPU (kernels.nvfp4.ops.linear).
    """

    def __init__(self, weight):
        super().__init__()
        self.nvfp4 = weight if isinstance(weight, NVFP4Weight) else None
        self.weight = None if self.nvfp4 is not None else torch.nn.Parameter(weight, requires_grad=False)

    @property
    def in_features(self) -> int:
        return int((self.nvfp4 or self.weight).shape[1])

    @property
    def out_features(self) -> int:
        return int((self.nvfp4 or self.weight).shape[0])

    @staticmethod
    def from_weights(tensors: dict, dtype=None) -> "Linear":
        """tensors: {"weight": [out, in]} as read from the checkpoint; cast to `dtype` when given. NVFP4 tensors of
        either layout (weight_packed... or u8 weight + weight_scale_2...) or an NVFP4Weight stay 4-bit."""
        weight = tensors["weight"] if "weight" in tensors else None
        if isinstance(weight, NVFP4Weight):
            return Linear(weight)
        if "weight_packed" in tensors or "weight_scale_2" in tensors:
            return Linear(nvfp4_from_tensors(tensors))
        return Linear(weight.to(dtype) if dtype is not None else weight)

    def _apply(self, fn, recurse=True):
        # Module.to / .cuda move the NVFP4 tensors to the new device, never to a new dtype
        if self.nvfp4 is not None:
            device = fn(torch.empty(0, device=self.nvfp4.device)).device
            if device != self.nvfp4.device:
                self.nvfp4 = self.nvfp4.to(device)
        return super()._apply(fn, recurse)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.nvfp4 is not None:
            return nvfp4_ops.linear(x, self.nvfp4)
        return torch.nn.functional.linear(x, self.weight)
