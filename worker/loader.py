"""Worker process: loads a Qwen3.5 / Qwen3-Next / Qwen3.5-MoE checkpoint folder into a Qwen3_5ForCausalLM (mmap)."""
import os

import torch
from tqdm import tqdm

from kernels.nvfp4 import checkpoint as nvfp4_checkpoint
from worker.checkpoint import SafetensorsCheckpoint
from worker.checkpoint_errors import (CheckpointError, MissingFileError, MissingTensorError, TensorShapeError,
                                      UnsupportedModelError, check_folder)
from worker.config import CT_FORMATS, QUANT_METHODS, ROPE_TYPES, ModelConfig
from worker.loader_fused import FUSED_EXPERTS, fused_instead, merged_instead, read_experts, read_fused, read_merged
from worker.loader_linear import check_not_codes, read_checked, read_linear, stored
from worker.model_card import legacy_quantization, load_model_card
from worker.models.qwen3_5 import Qwen3_5ForCausalLM
from worker.models.qwen3_5_weights import disk_name, tensor_shapes

__all__ = ["load_model", "load_model_card", "CheckpointError", "MissingFileError", "UnsupportedModelError",
           "TensorShapeError", "MissingTensorError"]

# 2-D weights the model uses as plain matrices, not through a Linear (the embedding lookup, the MoE router's logits):
# stored NVFP4 (a recipe that did not leave them out), they are dequantized at load; kept 4-bit, the model was built
# with an NVFP4Weight where it needs a tensor and load_model died with AttributeError ('NVFP4Weight' object has no
# attribute 'detach')
_PLAIN_MATRICES = ("embed_tokens.weight", "mlp.gate.weight")


# hidden_act names of SiLU (transformers activations.py ACT2CLS: "silu" SiLUActivation, "swish" nn.SiLU), the one
# activation the MLP and the GDN conv compute; another is refused
SILU_NAMES = ("silu", "swish")


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
    if config.hidden_act not in SILU_NAMES:
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


def _detect_prefix(config: ModelConfig, ckpt: SafetensorsCheckpoint) -> None:
    """transformers saves Qwen3_5(Moe)ForCausalLM (model_type *_text) under model.language_model., vLLM's own names
    (a checkpoint it dumped) put the language model under language_model.model. (and the head at
    language_model.lm_head: vLLM qwen3_5.py hf_to_vllm_mapper): follow the checkpoint when the embedding is only found
    under another prefix."""
    for prefix in ("model.", "model.language_model.", "language_model.model."):
        if config.weight_prefix + "embed_tokens.weight" not in ckpt and prefix + "embed_tokens.weight" in ckpt:
            config.language_prefix = prefix


def _shapes_to_read(config: ModelConfig, ckpt: SafetensorsCheckpoint) -> dict:
    """tensor_shapes, plus lm_head.weight where tie_word_embeddings is set yet the checkpoint stores one: transformers'
    from_pretrained then keeps the stored head unless it equals the embedding (modeling_utils.py tie_weights: "both
    are present in the checkpoints with different values, so we will NOT tie them")."""
    shapes = tensor_shapes(config)
    if config.tie_word_embeddings and stored(ckpt, disk_name(config, "lm_head.weight")):
        shapes["lm_head.weight"] = (config.vocab_size, config.hidden_size)
    return shapes


def _read_tensors(config: ModelConfig, ckpt: SafetensorsCheckpoint, device, dtype, progress: bool) -> dict:
    shapes = _shapes_to_read(config, ckpt)
    tensors, fused = {}, {}
    bar = tqdm(shapes.items(), desc=f"loading {os.path.basename(ckpt.folder)}", unit="tensor",
               disable=not progress, leave=False)
    for canonical, expected in bar:
        name = disk_name(config, canonical)
        if canonical.endswith(FUSED_EXPERTS):
            tensor = read_experts(config, ckpt, canonical, expected, dtype)
        elif fused_instead(config, ckpt, canonical):
            tensor = read_fused(config, ckpt, canonical, fused, dtype)
            if isinstance(tensor, nvfp4_checkpoint.NVFP4Weight):
                tensors[canonical] = tensor.to(device)
                continue
        elif merged_instead(config, ckpt, canonical):
            tensor = read_merged(config, ckpt, canonical, shapes, fused)
        elif name.endswith(".weight") and len(expected) == 2 and \
                (quantized := read_linear(ckpt, name, expected, dtype)) is not None:
            if not canonical.endswith(_PLAIN_MATRICES):
                tensors[canonical] = quantized.to(device)
                continue
            tensor = quantized.dequantize(dtype) if isinstance(quantized, nvfp4_checkpoint.NVFP4Weight) else quantized
        else:
            tensor = read_checked(ckpt, name, expected)
        check_not_codes(ckpt, name, tensor)
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
