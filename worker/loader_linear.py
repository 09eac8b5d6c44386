"""Worker process (model loading): one Linear weight read from a checkpoint in any stored layout (dense, FP8,
NVFP4), checked against its expected shape, with the layouts this loader does not read refused by name."""
import torch

from kernels.nvfp4 import checkpoint as nvfp4_checkpoint
from worker.checkpoint import SafetensorsCheckpoint
from worker.checkpoint_errors import MissingTensorError, TensorShapeError, UnsupportedModelError

_CODE_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2, torch.uint8, torch.int8)
# header dtypes of the FP8 layout's weight_scale / weight_scale_inv that this loader multiplies by
_SCALE_DTYPES = ("F32", "BF16", "F16")
# tensors beside a Linear's weight that change what it computes and that no layout here applies: served without them,
# the layer would be silently wrong
_UNREAD_PARTS = {
    "pre_quant_scale": "ModelOpt AWQ's per-input-channel activation scale (NVFP4_AWQ, INT4_AWQ, W4A8_AWQ) is not "
                       "applied by this loader",
    "weight_zero_point": "compressed-tensors asymmetric weights (zero points) are not read by this loader",
    "scales": "MLX's quantized layout (codes packed in uint32 words beside per-group scales and biases: the "
              "mlx-community conversions) is not read by this loader",
}


def read_checked(ckpt: SafetensorsCheckpoint, name: str, expected: tuple) -> torch.Tensor:
    found = ckpt.shape(name)
    if found != tuple(expected):
        raise TensorShapeError(name, expected, found, ckpt.file_of(name))
    return ckpt.get(name)


def dequantize_fp8(ckpt: SafetensorsCheckpoint, name: str, codes: torch.Tensor, grid: torch.Tensor):
    try:
        return nvfp4_checkpoint.dequantize_fp8(codes, grid, ckpt.fp8_block)
    except ValueError as exc:
        raise UnsupportedModelError(ckpt.file_of(name), f"tensor {name}: {exc}") from exc


def check_not_codes(ckpt: SafetensorsCheckpoint, name: str, tensor: torch.Tensor) -> None:
    """Quantized codes (FP8, packed bytes) left without a scale this loader reads would be served as the weights
    themselves: refused naming the tensor, as no stored layout (kernels.nvfp4.checkpoint.layout_of) matched."""
    if tensor.dtype in _CODE_DTYPES:
        where = ckpt.file_of(name) if name in ckpt else ckpt.folder
        raise UnsupportedModelError(where, f"tensor {name} is stored as {tensor.dtype} without a scale "
                                                        "this loader reads (weight_scale, weight_scale_2, "
                                                        "weight_scale_inv, weight_packed)")


def read_any(ckpt: SafetensorsCheckpoint, name: str, expected: tuple, dtype):
    """Linear weight `name` in any stored layout: an NVFP4Weight, or a tensor (dense as stored, FP8 dequantized)."""
    weight = read_linear(ckpt, name, expected, dtype)
    return read_checked(ckpt, name, expected) if weight is None else weight


def read_dense(ckpt: SafetensorsCheckpoint, name: str, expected: tuple, dtype) -> torch.Tensor:
    """Linear weight `name` as a dense tensor in any stored layout (NVFP4 dequantized)."""
    weight = read_any(ckpt, name, expected, dtype)
    return weight.dequantize(dtype) if isinstance(weight, nvfp4_checkpoint.NVFP4Weight) else weight


def stored(ckpt: SafetensorsCheckpoint, name: str) -> bool:
    """Whether Linear weight `name` is in the checkpoint in any layout (dense `weight` or compressed-tensors'
    `weight_packed`)."""
    return name in ckpt or nvfp4_checkpoint.layout_of(ckpt.weight_map, name[: -len(".weight")]) != "dense"


def _check_fp8_scale(ckpt: SafetensorsCheckpoint, prefix: str) -> None:
    """An FP8-layout Linear's scale must hold numbers (f32 / bf16 / f16): MX formats (ModelOpt MXFP8 / MXFP4) store
    uint8 E8M0 exponents there, which multiplied as numbers give weights up to 2^127 / 127 times off (MXFP8 loaded
    silently with every weight x127 before), or MXFP4's packed codes a misleading shape error."""
    scale = f"{prefix}.weight_scale" if f"{prefix}.weight_scale" in ckpt else f"{prefix}.weight_scale_inv"
    if ckpt.dtype(scale) == "F8_E4M3" and ckpt.dtype(f"{prefix}.weight") == "U8":
        # NVFP4 codes and block scales without ModelOpt's global scale (vllm-project/vllm#54444: vLLM then serves
        # whatever its uninitialised global scale holds); named here, not as an E8M0 scale
        raise MissingTensorError(f"{prefix}.weight_scale_2", f"{ckpt.file_of(scale)} (the global scale of the NVFP4 "
                                                             f"codes {prefix}.weight and block scales {scale})")
    if ckpt.dtype(scale) not in _SCALE_DTYPES:
        raise UnsupportedModelError(ckpt.file_of(scale), f"tensor {scale} is stored as {ckpt.dtype(scale)}, not a "
                                                         "float scale (MX E8M0 block exponents are not read)")


def read_linear(ckpt: SafetensorsCheckpoint, name: str, expected: tuple, dtype):
    """A Linear weight stored quantized -> NVFP4Weight (either NVFP4 layout, kept 4-bit) or a dense tensor in
    `dtype` (FP8 layers dequantized); None when `name` is stored dense. Raises TensorShapeError on a mismatch."""
    prefix = name[: -len(".weight")]
    for extra, why in _UNREAD_PARTS.items():
        part = f"{prefix}.{extra}"
        # older compressed-tensors releases saved all-zero zero points for symmetric weights: ignoring those is exact
        if part in ckpt and not (extra == "weight_zero_point" and not ckpt.get(part).any()):
            raise UnsupportedModelError(ckpt.file_of(part), f"tensor {part}: {why}")
    layout = nvfp4_checkpoint.layout_of(ckpt.weight_map, prefix)
    if layout == "dense":
        return None
    if layout == "fp8":
        _check_fp8_scale(ckpt, prefix)
    try:
        weight = nvfp4_checkpoint.read_linear(ckpt.get, prefix, ckpt.weight_map, dtype, ckpt.fp8_block)
    except ValueError as exc:
        raise UnsupportedModelError(ckpt.file_of(name), f"tensor {name}: {exc}") from exc
    if tuple(weight.shape) != tuple(expected):
        raise TensorShapeError(name, expected, tuple(weight.shape), ckpt.file_of(name))
    return weight
