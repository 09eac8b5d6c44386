"""Worker process: loads a Qwen3.5 / Qwen3-Next / Qwen3.5-MoE checkpoint folder into a Qwen3_5ForCausalLM (mmap)."""
import os

import torch
from tqdm import tqdm

from kernels.nvfp4 import checkpoint as nvfp4_checkpoint
from worker.checkpoint import SafetensorsCheckpoint
from worker.checkpoint_errors import (CheckpointError, MissingFileError, MissingTensorError, TensorShapeError,
                                      UnsupportedModelError, check_folder)
from worker.config import CT_FORMATS, QUANT_METHODS, ROPE_TYPES, ModelConfig
from worker.layers.gdn import split_fused_qkvz
from worker.model_card import legacy_quantization, load_model_card
from worker.models.qwen3_5 import Qwen3_5ForCausalLM
from worker.models.qwen3_5_weights import disk_name, tensor_shapes

__all__ = ["load_model", "load_model_card", "CheckpointError", "MissingFileError", "UnsupportedModelError",
           "TensorShapeError", "MissingTensorError"]

# Qwen3.5's split GDN projections -> the Qwen3-Next tensor that holds each fused
_FUSED = {"in_proj_qkv": "in_proj_qkvz", "in_proj_z": "in_proj_qkvz", "in_proj_b": "in_proj_ba",
          "in_proj_a": "in_proj_ba"}
_EXPERTS = nvfp4_checkpoint.FUSED_EXPERTS
# 2-D weights the model uses as plain matrices, not through a Linear (the embedding lookup, the MoE router's logits):
# stored NVFP4 (a recipe that did not leave them out), they are dequantized at load; kept 4-bit, the model was built
# with an NVFP4Weight where it needs a tensor and load_model died with AttributeError ('NVFP4Weight' object has no
# attribute 'detach')
_PLAIN_MATRICES = ("embed_tokens.weight", "mlp.gate.weight")
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


def _check_supported(config: ModelConfig, path: str) -> None:
    if config.num_experts > 0 and not config.is_moe:
        raise UnsupportedModelError(path, f"{config.model_type} with num_experts > 0: MoE is only read for "
                                          "qwen3_next / qwen3_5_moe checkpoints")
    if config.model_type == "qwen3_next" and config.num_experts == 0 and config.intermediate_size <= 0:
        raise UnsupportedModelError(path, "qwen3_next with neither experts nor intermediate_size")
    if config.rope_type not in ROPE_TYPES:
        raise UnsupportedModelError(path, f"rope_type {config.rope_type!r} (supported: {', '.join(ROPE_TYPES)})")
    if config.attention_bias:
        raise UnsupportedModelError(path, "attention_bias true (q/k/v/o_proj biases are not read)")
    if config.hidden_act != "silu":
        raise UnsupportedModelError(path, f"hidden_act {config.hidden_act!r} (only silu)")
    if config.quant_method and config.quant_method not in QUANT_METHODS:
        raise UnsupportedModelError(path, f"quantization_config quant_method {config.quant_method!r} (read: "
                                          f"{', '.join(QUANT_METHODS)})")
    unread = [f for f in config.quant_formats if f not in CT_FORMATS]
    if config.quant_method == "compressed-tensors" and unread:
        raise UnsupportedModelError(path, f"compressed-tensors format {unread[0]!r} (read: {', '.join(CT_FORMATS)})")
    if config.quant_online_transforms:
        raise UnsupportedModelError(path, f"quantization_config.transform_config rotates activations at run time "
                                          f"({', '.join(config.quant_online_transforms)}: QuIP / SpinQuant online "
                                          "Hadamards), which this loader does not apply")
    if config.linear_num_value_heads % config.linear_num_key_heads:
        raise UnsupportedModelError(path, "linear_num_value_heads must be a multiple of linear_num_key_heads")


def _read_checked(ckpt: SafetensorsCheckpoint, name: str, expected: tuple) -> torch.Tensor:
    found = ckpt.shape(name)
    if found != tuple(expected):
        raise TensorShapeError(name, expected, found, ckpt.file_of(name))
    return ckpt.get(name)


def _read_fused(config: ModelConfig, ckpt: SafetensorsCheckpoint, canonical: str, cache: dict, dtype):
    """Qwen3-Next layout: reads linear_attn.in_proj_qkvz / in_proj_ba once and returns the requested split: a tensor,
    or an NVFP4Weight where the fused Linear is stored NVFP4 (its rows split alike; the global scale is shared)."""
    layer_prefix, part = canonical.rsplit(".", 2)[0], canonical.rsplit(".", 2)[1]
    if layer_prefix not in cache:
        d, hv = config.hidden_size, config.linear_num_value_heads
        shapes = {"in_proj_qkvz": (2 * config.key_dim + 2 * config.value_dim, d), "in_proj_ba": (2 * hv, d)}
        fused = {}
        for key, shape in shapes.items():
            fused[key] = _read_any(ckpt, disk_name(config, f"{layer_prefix}.{key}.weight"), shape, dtype)
        rows = {key: torch.arange(w.shape[0])[:, None] for key, w in fused.items()}
        split = split_fused_qkvz(rows["in_proj_qkvz"], rows["in_proj_ba"], config.linear_num_key_heads,
                                 config.linear_key_head_dim, config.linear_value_head_dim, hv)
        cache[layer_prefix] = {name: _take_rows(fused[_FUSED[name]], index[:, 0]) for name, index in split.items()}
    return cache[layer_prefix][part]


def _take_rows(weight, index: torch.Tensor):
    """Rows `index` of a dense [N, K] tensor or of an NVFP4Weight (codes and block scales are per row)."""
    if isinstance(weight, nvfp4_checkpoint.NVFP4Weight):
        return nvfp4_checkpoint.NVFP4Weight(weight.packed[index].contiguous(), weight.scale[index].contiguous(),
                                            weight.gmul)
    return weight[index]


def _check_fused_experts_unquantized(ckpt: SafetensorsCheckpoint, name: str) -> None:
    """Fused experts `name` stored as NVFP4 in one tensor per projection (`{name}_packed` / `_scale` /
    `_global_scale`, or u8 codes under `name`: unsloth/unsloth#6224's Qwen3.6-35B-A3B-NVFP4) are refused naming what
    was found; their global scale's shape and sense differ between producers. Before, the loader named
    experts.0.gate_proj.weight as missing, a tensor such a checkpoint never has, or a [E, 2I, D/2] shape error."""
    siblings = [name + part for part in ("_packed", "_scale", "_global_scale", "_scale_2") if name + part in ckpt]
    if name not in ckpt and not siblings or name in ckpt and ckpt.dtype(name) not in ("U8", "I8"):
        return
    found = name if name in ckpt else siblings[0]
    raise UnsupportedModelError(ckpt.file_of(found), f"tensor {found}: routed experts quantized as one fused tensor "
                                f"per projection ({', '.join(n.rsplit('.', 1)[1] for n in siblings)}) are not read; "
                                "quantized experts are read stored one Linear per expert (experts.{e}.gate_proj, "
                                "up_proj, down_proj), as ModelOpt exports them")


def _read_experts(config: ModelConfig, ckpt: SafetensorsCheckpoint, canonical: str, expected: tuple,
                  dtype) -> torch.Tensor:
    """experts.gate_up_proj [E, 2I, D] / experts.down_proj [E, D, I]: the fused tensor when the checkpoint has it
    (Qwen3.5-MoE, transformers v5 saves), else stacked from `experts.{e}.{gate,up,down}_proj.weight` (Qwen3-Next);
    per-expert NVFP4 / FP8 weights are dequantized to `dtype` (the MoE block runs dense experts)."""
    name = disk_name(config, canonical)
    _check_fused_experts_unquantized(ckpt, name)
    if name in ckpt:
        fused = _read_checked(ckpt, name, expected)
        if name + "_scale_inv" not in ckpt:
            return fused
        # transformers' FP8 experts (FP8Experts): one weight_scale_inv grid per expert beside the fused codes
        scales = ckpt.get(name + "_scale_inv")
        return torch.stack([_dequantize_fp8(ckpt, name, codes, grid) for codes, grid in zip(fused, scales)])
    base = name.rsplit(".", 1)[0] + "."
    num_experts, rows, cols = expected
    if canonical.endswith("down_proj"):
        return torch.stack([_read_dense(ckpt, f"{base}{e}.down_proj.weight", (rows, cols), dtype)
                            for e in range(num_experts)])
    return torch.stack([torch.cat([_read_dense(ckpt, f"{base}{e}.{p}_proj.weight", (rows // 2, cols), dtype)
                                   for p in ("gate", "up")]) for e in range(num_experts)])


def _dequantize_fp8(ckpt: SafetensorsCheckpoint, name: str, codes: torch.Tensor, grid: torch.Tensor):
    try:
        return nvfp4_checkpoint.dequantize_fp8(codes, grid, ckpt.fp8_block)
    except ValueError as exc:
        raise UnsupportedModelError(ckpt.file_of(name), f"tensor {name}: {exc}") from exc


def _check_not_codes(ckpt: SafetensorsCheckpoint, name: str, tensor: torch.Tensor) -> None:
    """Quantized codes (FP8, packed bytes) left without a scale this loader reads would be served as the weights
    themselves: refused naming the tensor, as no stored layout (kernels.nvfp4.checkpoint.layout_of) matched."""
    if tensor.dtype in _CODE_DTYPES:
        where = ckpt.file_of(name) if name in ckpt else ckpt.folder
        raise UnsupportedModelError(where, f"tensor {name} is stored as {tensor.dtype} without a scale "
                                                        "this loader reads (weight_scale, weight_scale_2, "
                                                        "weight_scale_inv, weight_packed)")


def _read_any(ckpt: SafetensorsCheckpoint, name: str, expected: tuple, dtype):
    """Linear weight `name` in any stored layout: an NVFP4Weight, or a tensor (dense as stored, FP8 dequantized)."""
    weight = _read_linear(ckpt, name, expected, dtype)
    return _read_checked(ckpt, name, expected) if weight is None else weight


def _read_dense(ckpt: SafetensorsCheckpoint, name: str, expected: tuple, dtype) -> torch.Tensor:
    """Linear weight `name` as a dense tensor in any stored layout (NVFP4 dequantized)."""
    weight = _read_any(ckpt, name, expected, dtype)
    return weight.dequantize(dtype) if isinstance(weight, nvfp4_checkpoint.NVFP4Weight) else weight


def _stored(ckpt: SafetensorsCheckpoint, name: str) -> bool:
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


def _read_linear(ckpt: SafetensorsCheckpoint, name: str, expected: tuple, dtype):
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


def _detect_prefix(config: ModelConfig, ckpt: SafetensorsCheckpoint) -> None:
    """transformers saves Qwen3_5(Moe)ForCausalLM (model_type *_text) under model.language_model.: follow the
    checkpoint when the embedding is only found under the other prefix."""
    for prefix in ("model.", "model.language_model."):
        if config.weight_prefix + "embed_tokens.weight" not in ckpt and prefix + "embed_tokens.weight" in ckpt:
            config.language_prefix = prefix


def _shapes_to_read(config: ModelConfig, ckpt: SafetensorsCheckpoint) -> dict:
    """tensor_shapes, plus lm_head.weight where tie_word_embeddings is set yet the checkpoint stores one: transformers'
    from_pretrained then keeps the stored head unless it equals the embedding (modeling_utils.py tie_weights: "both
    are present in the checkpoints with different values, so we will NOT tie them")."""
    shapes = tensor_shapes(config)
    if config.tie_word_embeddings and _stored(ckpt, "lm_head.weight"):
        shapes["lm_head.weight"] = (config.vocab_size, config.hidden_size)
    return shapes


def _fused_instead(config: ModelConfig, ckpt: SafetensorsCheckpoint, canonical: str) -> bool:
    """Split GDN projection `canonical` is read from Qwen3-Next's fused tensor: it is not stored, the fused one is.
    Neither stored: the layout of the config's kind (fused for qwen3_next, split for Qwen3.5), so that the
    MissingTensorError names a tensor the checkpoint should hold."""
    parts = canonical.rsplit(".", 2)
    if len(parts) < 3 or parts[1] not in _FUSED:
        return False
    fused = f"{parts[0]}.{_FUSED[parts[1]]}.weight"
    if _stored(ckpt, disk_name(config, canonical)):
        return False
    return config.model_type == "qwen3_next" or _stored(ckpt, disk_name(config, fused))


def _read_tensors(config: ModelConfig, ckpt: SafetensorsCheckpoint, device, dtype, progress: bool) -> dict:
    shapes = _shapes_to_read(config, ckpt)
    tensors, fused = {}, {}
    bar = tqdm(shapes.items(), desc=f"loading {os.path.basename(ckpt.folder)}", unit="tensor",
               disable=not progress, leave=False)
    for canonical, expected in bar:
        name = disk_name(config, canonical)
        if canonical.endswith(_EXPERTS):
            tensor = _read_experts(config, ckpt, canonical, expected, dtype)
        elif _fused_instead(config, ckpt, canonical):
            tensor = _read_fused(config, ckpt, canonical, fused, dtype)
            if isinstance(tensor, nvfp4_checkpoint.NVFP4Weight):
                tensors[canonical] = tensor.to(device)
                continue
        elif name.endswith(".weight") and len(expected) == 2 and \
                (quantized := _read_linear(ckpt, name, expected, dtype)) is not None:
            if not canonical.endswith(_PLAIN_MATRICES):
                tensors[canonical] = quantized.to(device)
                continue
            tensor = quantized.dequantize(dtype) if isinstance(quantized, nvfp4_checkpoint.NVFP4Weight) else quantized
        else:
            tensor = _read_checked(ckpt, name, expected)
        _check_not_codes(ckpt, name, tensor)
        tensors[canonical] = tensor.to(device=device, dtype=dtype)
    head, embed = tensors.get("lm_head.weight"), tensors["embed_tokens.weight"]
    if config.tie_word_embeddings and isinstance(head, torch.Tensor) and torch.equal(head, embed):
        del tensors["lm_head.weight"]
    return tensors


def load_model(path: str, device="cpu", dtype=torch.float32, progress=True):
    """Loads folder `path` -> (Qwen3_5ForCausalLM in eval mode on `device`, ModelConfig).

    Every tensor is read in its on-disk dtype and cast to `dtype`, A_log and dt_bias included (as transformers
    does: g is then computed from A_log.float()); `model.visual.*` and `mtp.*` are never read.
    MoE experts are stacked into [E, 2I, D] / [E, D, I] when stored per expert on disk. Linear weights stored
    NVFP4 (ModelOpt `weight`/`weight_scale`/`weight_scale_2` or compressed-tensors `weight_packed`/`weight_scale`/
    `weight_global_scale`) stay 4-bit (kernels.nvfp4.checkpoint.NVFP4Weight); FP8 ones (per tensor, per row, or in
    blocks: `weight_scale_inv`, Qwen's -FP8 checkpoints) are dequantized to `dtype`;
    layers a recipe left in bf16 load as usual (per-layer mixed checkpoints).
    Raises MissingFileError (folder, config.json or a shard absent), UnsupportedModelError (model_type, variant),
    MissingTensorError (names the tensor and where it was looked for), TensorShapeError (tensor, expected, found).
    """
    check_folder(path)
    config = ModelConfig.from_file(path)
    _check_supported(config, os.path.join(path, "config.json"))
    ckpt = SafetensorsCheckpoint(path)
    if not config.quant_method:
        legacy_quantization(path)  # read by read_quant_config when config.json has no quantization_config
    ckpt.fp8_block = nvfp4_checkpoint.read_quant_config(path).fp8_block
    _detect_prefix(config, ckpt)
    tensors = _read_tensors(config, ckpt, device, dtype, progress)
    model = Qwen3_5ForCausalLM(config, tensors).eval()
    return model, config
