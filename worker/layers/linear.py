"""Worker process: a bias-free linear layer built from checkpoint tensors (the one place weight formats plug in)."""
import torch


class Linear(torch.nn.Module):
    """y = x W^T. weight [out_features, in_features]; x [..., in_features] -> y [..., out_features] in x's dtype.

    Built from tensors, never initialised: `Linear(weight)` or `Linear.from_weights({"weight": W}, dtype)`.
    Quantized formats (NVFP4) are added here behind the same forward(x).
    """

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])

    @staticmethod
    def from_weights(tensors: dict, dtype=None) -> "Linear":
        """tensors: {"weight": [out, in]} as read from the checkpoint; cast to `dtype` when given."""
        weight = tensors["weight"]
        return Linear(weight.to(dtype) if dtype is not None else weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight)
