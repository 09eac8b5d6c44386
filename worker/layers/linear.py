"""Worker process: a bias-free linear layer built from checkpoint tensors (the one place weight formats plug in)."""
import torch

from kernels.dense import ops as dense_ops
from kernels.nvfp4 import gemv_bt
from kernels.nvfp4 import ops as nvfp4_ops
from kernels.nvfp4.checkpoint import NVFP4Weight, from_tensors as nvfp4_from_tensors

# CUDA NVFP4 routing without the Hopper wgmma GEMM: 32 < M <= CHUNKED_GEMV_MAX_M rows run as ceil(M / 32) GEMV
# launches instead of the mma.sync GEMM (worker/GPU_NOTES.md: C = 64 decode step 72.4 -> 43.3 ms on the H200). With
# wgmma (kernels/nvfp4/ops.wgmma_serves) every M > 32 goes to the GEMM: the 27B-shaped step at C = 64 took 30.5 ms
# against 36.5 ms with the chunked GEMV (bench/gpu_model.py, session 2)
CHUNKED_GEMV_MAX_M = 128


class Linear(torch.nn.Module):
    """y = x W^T. weight [out_features, in_features]; x [..., in_features] -> y [..., out_features] in x's dtype.

    Built from tensors, never initialised: `Linear(weight)` or `Linear.from_weights({"weight": W}, dtype)`.
    NVFP4: `Linear(NVFP4Weight)` (kernels.nvfp4.checkpoint) keeps the 4-bit weight; forward runs the CUDA kernels on
    GPU and the naive dequantize path on CPU (kernels.nvfp4.ops.linear). Dense: torch's F.linear, except small bf16
    weights at decode (at most 4 rows) on the GPU, which run kernels.dense.ops.gemv (one launch, not cuBLAS's
    split-K GEMM + reduce).
    """

    def __init__(self, weight):
        super().__init__()
        self.nvfp4 = weight if isinstance(weight, NVFP4Weight) else None
        self.weight = None if self.nvfp4 is not None else torch.nn.Parameter(weight, requires_grad=False)
        self._stashed = None  # (x, this layer(x)) computed ahead by RMSNorm.forward_into (stash)

    @property
    def in_features(self) -> int:
        """K: the input width in elements (weight [N, K]; an NVFP4 weight's packed [N, K/2] bytes count twice)."""
        return int((self.nvfp4 or self.weight).shape[1])

    @property
    def out_features(self) -> int:
        """N: the output width."""
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

    def forward(self, x: torch.Tensor, out: torch.Tensor = None) -> torch.Tensor:
        """x [..., in] -> [..., out_features]. out: [M, out_features] contiguous in x's dtype (M = x.numel() / in), a
        static buffer to write into (the piecewise prefill graphs, worker/prefill_graphs.py); returned reshaped."""
        if out is not None:
            return self._forward_into(x, out)
        stashed, self._stashed = self._stashed, None
        if stashed is not None and stashed[0] is x:  # computed with the norm that made x (RMSNorm.forward_into)
            return stashed[1]
        if self.nvfp4 is not None:
            rows = x.numel() // max(1, x.shape[-1])
            if x.is_cuda and nvfp4_ops.GEMV_MAX_M < rows <= CHUNKED_GEMV_MAX_M and not nvfp4_ops.wgmma_serves(x.device):
                return chunked_gemv(x, self.nvfp4)
            return nvfp4_ops.linear(x, self.nvfp4)
        if x.is_cuda and dense_ops.serves(x, self.weight):
            return dense_ops.gemv(x, self.weight)
        return torch.nn.functional.linear(x, self.weight)

    def _forward_into(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """forward(x) written into `out` (no stash, no chunked GEMV: the GEMM / GEMV of nvfp4 ops.linear, or a
        matmul into out for dense weights). ValueError where out is not [M, out_features] contiguous in x's dtype."""
        rows = x.numel() // max(1, x.shape[-1])
        if tuple(out.shape) != (rows, self.out_features) or out.dtype != x.dtype or not out.is_contiguous():
            raise ValueError(f"Linear: out must be [{rows}, {self.out_features}] {x.dtype} contiguous")
        if self.nvfp4 is not None:
            return nvfp4_ops.linear(x, self.nvfp4, out)
        torch.matmul(x.reshape(rows, -1), self.weight.t(), out=out)
        return out.reshape(*x.shape[:-1], self.out_features)

    def stash(self, x: torch.Tensor, out: torch.Tensor) -> None:
        """Keeps out = this layer(x), already computed, for the next forward call, which returns it if that call's
        input is the tensor x itself (else it is dropped and the call computes)."""
        self._stashed = (x, out)

    def forward_rms_norm(self, x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor,
                         eps: float) -> "tuple | None":
        """(this layer(y), y, h) with h = x + residual and y = RMSNorm(h) in one NVFP4 GEMV launch where one serves
        (one row on a Hopper GPU: kernels.nvfp4.gemv_bt.rms_norm_linear), else None."""
        if self.nvfp4 is None:
            return None
        return gemv_bt.rms_norm_linear(x, residual, norm_weight, eps, self.nvfp4)

    def forward_gated_norm(self, x: torch.Tensor, z: torch.Tensor, norm_weight: torch.Tensor,
                           eps: float) -> "torch.Tensor | None":
        """This layer applied to the gated RMSNorm of x's 128-wide heads (gate z) in one NVFP4 GEMV launch where one
        serves (one row on a Hopper GPU: kernels.nvfp4.gemv_bt.gated_norm_linear), else None."""
        if self.nvfp4 is None:
            return None
        return gemv_bt.gated_norm_linear(x, z, norm_weight, eps, self.nvfp4)

    def forward_silu_mul(self, gate: torch.Tensor, up: torch.Tensor) -> "torch.Tensor | None":
        """This layer applied to silu(gate) * up in one NVFP4 GEMV launch where one serves (gate, up [1, K] bf16 on
        a Hopper GPU: kernels.nvfp4.gemv_bt.silu_mul_linear), else None and the caller runs the two steps."""
        if self.nvfp4 is None:
            return None
        return gemv_bt.silu_mul_linear(gate, up, self.nvfp4)


def prepack_nvfp4(model: torch.nn.Module) -> int:
    """Builds the kernels' repack of every NVFP4 Linear of `model` that sits on a CUDA device (at load, so the KV
    pool is sized with it counted: otherwise the first step adds a second copy of the weights, 14.4 GB on the 27B
    shape, after the pool took its share of the free memory) and frees the checkpoint-layout codes the kernels never
    read again. Returns the bytes freed; 0 on CPU, where the naive path reads the checkpoint layout."""
    freed = 0
    for module in model.modules():
        weight = getattr(module, "nvfp4", None) if isinstance(module, Linear) else None
        if weight is None or weight.device.type != "cuda" or weight.released:
            continue
        nvfp4_ops.prepared(weight)
        freed += weight.release_checkpoint_layout()
    return freed


def chunked_gemv(x: torch.Tensor, weight: NVFP4Weight) -> torch.Tensor:
    """x [..., K] on CUDA -> y [..., N] in x's dtype, the M = x.numel() / K rows as GEMV launches of at most
    nvfp4_ops.GEMV_MAX_M (32) rows each (each launch reads the weight once; bf16 math, f32 accumulate, as
    nvfp4_ops.linear). Row chunks of a contiguous [M, K] bf16 tensor stay contiguous and 16-byte aligned (K % 8 == 0)."""
    n, k = weight.shape
    x2 = x.reshape(-1, k).to(torch.bfloat16).contiguous()
    if x2.data_ptr() % 16 or k % 8:
        return nvfp4_ops.linear(x, weight)
    p = nvfp4_ops.prepared(weight)
    out = torch.empty(x2.shape[0], n, dtype=torch.bfloat16, device=x.device)
    step = nvfp4_ops.GEMV_MAX_M
    for i in range(0, x2.shape[0], step):
        nvfp4_ops.gemv(x2[i:i + step], p, out[i:i + step])
    return out.reshape(*x.shape[:-1], n).to(x.dtype)
