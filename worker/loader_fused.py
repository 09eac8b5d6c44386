"""Worker process (model loading): tensors stored fused that the model reads split or stacked (Qwen3-Next's GDN
in_proj_qkvz / in_proj_ba, MoE routed experts stored fused or one Linear per expert)."""
import torch

from kernels.nvfp4 import checkpoint as nvfp4_checkpoint
from worker.checkpoint import SafetensorsCheckpoint
from worker.checkpoint_errors import UnsupportedModelError
from worker.config import ModelConfig
from worker.layers.gdn import split_fused_qkvz
from worker.loader_linear import dequantize_fp8, read_any, read_checked, read_dense, stored
from worker.models.qwen3_5_weights import disk_name

# Qwen3.5's split GDN projections -> the Qwen3-Next tensor that holds each fused
_FUSED = {"in_proj_qkv": "in_proj_qkvz", "in_proj_z": "in_proj_qkvz", "in_proj_b": "in_proj_ba",
          "in_proj_a": "in_proj_ba"}
FUSED_EXPERTS = nvfp4_checkpoint.FUSED_EXPERTS
# vLLM's FusedMoE parameter names for the same fused tensors (vLLM-dumped checkpoints; Megatron-Bridge's NVFP4 export
# of grouped experts writes them too, NVIDIA-NeMo/Megatron-Bridge#4566): w13 holds the gate rows first (vLLM
# fused_moe layer.py _load_w13 puts w1 = gate_proj in the first half, w3 = up_proj in the second), w2 is down_proj
_VLLM_STEMS = {"gate_up_proj": "w13", "down_proj": "w2"}
# what vLLM's quantized MoE methods (ModelOpt, compressed-tensors, FP8) store beside {stem}_weight
_VLLM_QUANT_PARTS = ("_weight_scale", "_weight_scale_2", "_weight_scale_inv", "_weight_packed", "_weight_global_scale",
                     "_input_scale", "_input_global_scale")
_DENSE_DTYPES = ("BF16", "F16", "F32")
# vLLM's merged Linears and the checkpoint Linears they hold, rows in this order (its stacked_params_mapping:
# QKVParallelLinear q, k, v; MergedColumnParallelLinear gate, up); a vLLM-dumped checkpoint stores them so
_MERGED_PARTS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
_MERGED = {part: merged for merged, parts in _MERGED_PARTS.items() for part in parts}
# names only a vLLM dump holds
_VLLM_MARKS = ("self_attn.qkv_proj.weight", "mlp.gate_up_proj.weight", "shared_expert.gate_up_proj.weight",
               "experts.w13_weight")


def read_fused(config: ModelConfig, ckpt: SafetensorsCheckpoint, canonical: str, cache: dict, dtype):
    """Qwen3-Next layout: reads linear_attn.in_proj_qkvz / in_proj_ba once and returns the requested split: a tensor,
    or an NVFP4Weight where the fused Linear is stored NVFP4 (its rows split alike; the global scale is shared)."""
    layer_prefix, part = canonical.rsplit(".", 2)[0], canonical.rsplit(".", 2)[1]
    if layer_prefix not in cache:
        d, hv = config.hidden_size, config.linear_num_value_heads
        shapes = {"in_proj_qkvz": (2 * config.key_dim + 2 * config.value_dim, d), "in_proj_ba": (2 * hv, d)}
        fused = {}
        for key, shape in shapes.items():
            fused[key] = read_any(ckpt, disk_name(config, f"{layer_prefix}.{key}.weight"), shape, dtype)
        cache[layer_prefix] = {name: _take_rows(fused[_FUSED[name]], index)
                               for name, index in _gdn_rows(config, ckpt, cache).items()}
    return cache[layer_prefix][part]


def _gdn_rows(config: ModelConfig, ckpt: SafetensorsCheckpoint, cache: dict) -> dict:
    """The rows of in_proj_qkvz / in_proj_ba that hold each split GDN projection: Qwen3-Next's grouping per key head
    (split_fused_qkvz), or, in a Qwen3.5 checkpoint that vLLM dumped (it stores vLLM's merged names), vLLM's Qwen3.5
    layout: in_proj_qkvz = [in_proj_qkv; in_proj_z], in_proj_ba = [in_proj_b; in_proj_a] (qwen3_5.py
    stacked_params_mapping), which read as grouped rows would be served silently wrong."""
    if "vllm" not in cache:
        cache["vllm"] = any(name.endswith(_VLLM_MARKS) for name in ckpt.weight_map)
    hv, qkvz = config.linear_num_value_heads, torch.arange(2 * config.key_dim + 2 * config.value_dim)
    if config.model_type != "qwen3_next" and cache["vllm"]:
        return {"in_proj_qkv": qkvz[: config.conv_dim], "in_proj_z": qkvz[config.conv_dim:],
                "in_proj_b": torch.arange(hv), "in_proj_a": torch.arange(hv, 2 * hv)}
    split = split_fused_qkvz(qkvz[:, None], torch.arange(2 * hv)[:, None], config.linear_num_key_heads,
                             config.linear_key_head_dim, config.linear_value_head_dim, hv)
    return {name: index[:, 0] for name, index in split.items()}


def _take_rows(weight, index: torch.Tensor):
    """Rows `index` of a dense [N, K] tensor or of an NVFP4Weight (codes and block scales are per row)."""
    if isinstance(weight, nvfp4_checkpoint.NVFP4Weight):
        return nvfp4_checkpoint.NVFP4Weight(weight.packed[index].contiguous(), weight.scale[index].contiguous(),
                                            weight.gmul)
    return weight[index]


def fused_instead(config: ModelConfig, ckpt: SafetensorsCheckpoint, canonical: str) -> bool:
    """Split GDN projection `canonical` is read from Qwen3-Next's fused tensor: it is not stored, the fused one is.
    Neither stored: the layout of the config's kind (fused for qwen3_next, split for Qwen3.5), so that the
    MissingTensorError names a tensor the checkpoint should hold."""
    parts = canonical.rsplit(".", 2)
    if len(parts) < 3 or parts[1] not in _FUSED:
        return False
    fused = f"{parts[0]}.{_FUSED[parts[1]]}.weight"
    if stored(ckpt, disk_name(config, canonical)):
        return False
    return config.model_type == "qwen3_next" or stored(ckpt, disk_name(config, fused))


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


def read_experts(config: ModelConfig, ckpt: SafetensorsCheckpoint, canonical: str, expected: tuple,
                 dtype) -> torch.Tensor:
    """experts.gate_up_proj [E, 2I, D] / experts.down_proj [E, D, I]: the fused tensor when the checkpoint has it
    (Qwen3.5-MoE, transformers v5 saves; vLLM's experts.w13_weight / w2_weight, stored dense), else stacked from
    `experts.{e}.{gate,up,down}_proj.weight` (Qwen3-Next); per-expert NVFP4 / FP8 weights are dequantized to
    `dtype` (the MoE block runs dense experts)."""
    name = disk_name(config, canonical)
    _check_fused_experts_unquantized(ckpt, name)
    vllm_name = _vllm_experts_name(ckpt, name)
    if vllm_name is not None:
        return read_checked(ckpt, vllm_name, expected)
    if name in ckpt:
        fused = read_checked(ckpt, name, expected)
        if name + "_scale_inv" not in ckpt:
            return fused
        # transformers' FP8 experts (FP8Experts): one weight_scale_inv grid per expert beside the fused codes
        scales = ckpt.get(name + "_scale_inv")
        return torch.stack([dequantize_fp8(ckpt, name, codes, grid) for codes, grid in zip(fused, scales)])
    base = name.rsplit(".", 1)[0] + "."
    num_experts, rows, cols = expected
    if canonical.endswith("down_proj"):
        return torch.stack([read_dense(ckpt, f"{base}{e}.down_proj.weight", (rows, cols), dtype)
                            for e in range(num_experts)])
    return torch.stack([torch.cat([read_dense(ckpt, f"{base}{e}.{p}_proj.weight", (rows // 2, cols), dtype)
                                   for p in ("gate", "up")]) for e in range(num_experts)])


def _vllm_experts_name(ckpt: SafetensorsCheckpoint, name: str) -> str | None:
    """vLLM's name for fused experts `name` (experts.w13_weight for experts.gate_up_proj, experts.w2_weight for
    experts.down_proj) when the checkpoint stores that one dense; None when it is not stored. Stored quantized
    (w13_weight_scale / _scale_2 / w13_input_scale beside u8 codes, Megatron-Bridge#4566's NVFP4 export) it is
    refused naming the stored tensor: vLLM's global scale there is one per gate / up half ([E, 2]) and a backend's
    post-load copy may reorder or swizzle the halves and block scales. Before, the loader named
    experts.0.gate_proj.weight as missing, a tensor such a checkpoint never has."""
    base, leaf = name.rsplit(".", 1)
    stem = f"{base}.{_VLLM_STEMS[leaf]}"
    weight, parts = stem + "_weight", [stem + part for part in _VLLM_QUANT_PARTS if stem + part in ckpt]
    if weight not in ckpt and not parts:
        return None
    if not parts and ckpt.dtype(weight) in _DENSE_DTYPES:
        return weight
    found = weight if weight in ckpt else parts[0]
    stored_as = ", ".join(n.rsplit(".", 1)[1] for n in ([weight] if weight in ckpt else []) + parts)
    raise UnsupportedModelError(ckpt.file_of(found), f"tensor {found}: routed experts stored quantized under vLLM's "
                                f"fused parameter names ({stored_as}) are not read; quantized experts are read "
                                "stored one Linear per expert (experts.{e}.gate_proj, up_proj, down_proj), as "
                                "ModelOpt exports them")


def merged_instead(config: ModelConfig, ckpt: SafetensorsCheckpoint, canonical: str) -> bool:
    """Linear `canonical` (q/k/v_proj, an MLP's gate/up_proj) is read from vLLM's merged qkv_proj / gate_up_proj:
    it is not stored, the merged one is."""
    parts = canonical.rsplit(".", 2)
    if len(parts) < 3 or parts[1] not in _MERGED or parts[2] != "weight":
        return False
    merged = f"{parts[0]}.{_MERGED[parts[1]]}.weight"
    return not stored(ckpt, disk_name(config, canonical)) and stored(ckpt, disk_name(config, merged))


def read_merged(config: ModelConfig, ckpt: SafetensorsCheckpoint, canonical: str, shapes: dict,
                cache: dict) -> torch.Tensor:
    """Rows of vLLM's merged qkv_proj / gate_up_proj that hold Linear `canonical`, the merged tensor read once per
    layer (`cache`), split at the parts' row counts (`shapes`: tensor_shapes). Stored quantized it is refused naming
    it: vLLM's merged Linear keeps one scale per part, or one requantized to their maximum after loading."""
    prefix, part = canonical.rsplit(".", 2)[:2]
    merged = f"{prefix}.{_MERGED[part]}"
    if merged not in cache:
        names = [f"{prefix}.{p}.weight" for p in _MERGED_PARTS[_MERGED[part]]]
        rows = [shapes[n][0] for n in names]
        name = disk_name(config, merged + ".weight")
        layout = nvfp4_checkpoint.layout_of(ckpt.weight_map, name[: -len(".weight")])
        if layout != "dense" or name in ckpt and ckpt.dtype(name) not in _DENSE_DTYPES:
            where = ckpt.file_of(name) if name in ckpt else ckpt.folder
            raise UnsupportedModelError(where, f"tensor {name}: vLLM's merged {_MERGED[part]} stored quantized is not "
                                        f"read; its parts ({', '.join(_MERGED_PARTS[_MERGED[part]])}) are read "
                                        "quantized stored one Linear each, as ModelOpt and llm-compressor export them")
        weight = read_checked(ckpt, name, (sum(rows), shapes[names[0]][1]))
        cache[merged] = dict(zip(_MERGED_PARTS[_MERGED[part]], torch.split(weight, rows)))
    return cache[merged][part]
