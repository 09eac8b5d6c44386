"""Unit tests (CPU): layouts of published quantized Qwen3.5 / Qwen3-Next checkpoints that differ from what the
quantize command writes, each loaded against the plain layout of the same weights (its logits or its tensors)."""
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from kernels.nvfp4 import checkpoint, naive, quantize
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.loader import MissingTensorError, UnsupportedModelError, load_model
from worker.tiny import write_tiny_checkpoint


@pytest.fixture(scope="module")
def moe_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("moe"))
    write_tiny_checkpoint(path, arch="qwen3_5_moe")
    return path


def _variant(src: str, dst: str, change) -> str:
    """A copy of checkpoint folder `src` at `dst` whose weights are change(tensors) (a new dict)."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "model.safetensors")
    save_file(change(load_file(path)), path)
    return dst


def _logits(folder: str) -> torch.Tensor:
    model, config = load_model(folder, progress=False)
    ids = torch.randint(0, config.vocab_size, (30,), generator=torch.Generator().manual_seed(3)).tolist()
    cache = ModelCache(config, num_blocks=4, block_size=16, num_slots=1, device="cpu", dtype=torch.float32)
    with torch.no_grad():
        return model(ForwardBatch.from_rows([(ids, 0, 0, [1, 3], True)], 16), cache, all_logits=True)


@pytest.mark.parametrize("fmt", naive.FORMATS)
def test_nvfp4_router_and_embedding_load_dequantized(moe_path, tmp_path, fmt):
    """A recipe that did not leave the MoE router (mlp.gate) and the embedding out stores them NVFP4; the model uses
    them as plain matrices, so the loader dequantizes them, computing what a bf16 folder of the dequantized values
    does (before: AttributeError 'NVFP4Weight' object has no attribute 'detach' from load_model)."""
    plain = ("mlp.gate.weight", "embed_tokens.weight")

    def quantized(weights):
        out = {}
        for name, tensor in weights.items():
            if not name.endswith(plain):
                out[name] = tensor
                continue
            for key, value in naive.quantize(tensor.float(), fmt).items():
                out[f"{name[: -len('.weight')]}.{key}"] = value
        return out

    def dequantized(weights):
        codes = quantized(weights)
        out = {n: t for n, t in weights.items() if not n.endswith(plain)}
        for name in weights:
            if name.endswith(plain):
                prefix = name[: -len(".weight")]
                parts = {k: codes[f"{prefix}.{k}"] for k in naive.quantize(torch.zeros(1, 16), fmt)}
                out[name] = checkpoint.from_tensors(parts).dequantize(torch.float32)
        return out

    got = _logits(_variant(moe_path, str(tmp_path / "nvfp4"), quantized))
    want = _logits(_variant(moe_path, str(tmp_path / "dense"), dequantized))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)



def _fused_nvfp4_experts(style: str):
    """change() storing every fused expert tensor NVFP4 (compressed-tensors codes per expert, stacked): style "ct"
    under {name}_packed / _scale / _global_scale (unsloth/unsloth#6224), "u8" as codes under the name itself."""
    def change(weights):
        out = {}
        for name, tensor in weights.items():
            if not name.endswith(checkpoint.FUSED_EXPERTS):
                out[name] = tensor
                continue
            parts = [naive.quantize(expert.float(), "compressed-tensors") for expert in tensor]
            codes, scale, gscale = (torch.stack([p[k] for p in parts]) for k in checkpoint.CT_KEYS)
            if style == "ct":
                out.update({name + "_packed": codes, name + "_scale": scale, name + "_global_scale": gscale})
            else:
                out.update({name: codes, name + "_scale": scale, name + "_scale_2": 1 / gscale})
        return out
    return change


@pytest.mark.parametrize("style, found, parts", [
    ("ct", "experts.gate_up_proj_packed", "gate_up_proj_packed, gate_up_proj_scale, gate_up_proj_global_scale"),
    ("u8", "experts.gate_up_proj", "gate_up_proj_scale, gate_up_proj_scale_2")])
def test_fused_quantized_experts_are_refused_naming_what_is_stored(moe_path, tmp_path, style, found, parts):
    """Before: MissingTensorError for experts.0.gate_proj.weight (a tensor such a checkpoint never has), or a shape
    error on the u8 codes."""
    folder = _variant(moe_path, str(tmp_path / style), _fused_nvfp4_experts(style))
    with pytest.raises(UnsupportedModelError) as error:
        load_model(folder, progress=False)
    message = str(error.value)
    assert message.startswith(os.path.join(folder, "model.safetensors") + ": unsupported model: tensor "
                              f"model.language_model.layers.0.mlp.{found}: routed experts quantized as one fused "
                              f"tensor per projection ({parts}) are not read"), message


@pytest.mark.parametrize("linear", ["mlp.shared_expert.up_proj", "mlp.experts.1.down_proj"])
def test_nvfp4_linear_without_its_global_scale_is_named(moe_path, tmp_path, linear):
    """ModelOpt NVFP4 codes and block scales whose weight_scale_2 is absent (vllm-project/vllm#54444: served with an
    uninitialised global scale there): the missing tensor is named, where the loader said the F8_E4M3 block scale
    was no float scale (an MX E8M0 one)."""
    out = str(tmp_path / "nvfp4")
    quantize.quantize_folder(moe_path, out, "modelopt", progress=False)
    prefix = f"model.language_model.layers.2.{linear}"
    index_path = os.path.join(out, "model.safetensors.index.json")
    with open(index_path, encoding="utf-8") as f:
        index = json.load(f)
    shard = os.path.join(out, index["weight_map"].pop(prefix + ".weight_scale_2"))
    weights = load_file(shard)
    del weights[prefix + ".weight_scale_2"]
    save_file(weights, shard)
    with open(index_path, "w", encoding="utf-8") as f:
        json.dump(index, f)
    with pytest.raises(MissingTensorError) as error:
        load_model(out, progress=False)
    assert str(error.value) == (f"tensor {prefix}.weight_scale_2 missing from {shard} (the global scale of the NVFP4 "
                                f"codes {prefix}.weight and block scales {prefix}.weight_scale)")


def _vllm_names(weights):
    """The fused experts under vLLM's FusedMoE parameter names: gate_up_proj -> w13_weight (gate rows first, as vLLM
    fused_moe layer.py _load_w13 fills it), down_proj -> w2_weight."""
    stems = {"experts.gate_up_proj": "experts.w13_weight", "experts.down_proj": "experts.w2_weight"}
    return {next((n[: -len(k)] + v for k, v in stems.items() if n.endswith(k)), n): t for n, t in weights.items()}


def test_vllm_fused_expert_names_load(moe_path, tmp_path):
    """experts.w13_weight / w2_weight stored dense compute what experts.gate_up_proj / down_proj do. Before:
    MissingTensorError for experts.0.gate_proj.weight, a tensor such a checkpoint never has."""
    folder = _variant(moe_path, str(tmp_path / "vllm"), _vllm_names)
    assert "model.language_model.layers.0.mlp.experts.w13_weight" in load_file(os.path.join(folder,
                                                                                              "model.safetensors"))
    torch.testing.assert_close(_logits(folder), _logits(moe_path), rtol=0, atol=0)


def test_vllm_fused_nvfp4_experts_are_refused_naming_what_is_stored(moe_path, tmp_path):
    """Megatron-Bridge#4566's NVFP4 export of grouped experts: u8 codes under experts.w13_weight beside
    w13_weight_scale, w13_weight_scale_2 (one global scale per gate / up half) and w13_input_scale."""
    def change(weights):
        out = {}
        for name, tensor in _vllm_names(weights).items():
            if not name.endswith(("w13_weight", "w2_weight")):
                out[name] = tensor
                continue
            parts = [naive.quantize(expert.float(), "modelopt") for expert in tensor]
            halves = 2 if name.endswith("w13_weight") else 1
            out.update({name: torch.stack([p["weight"] for p in parts]),
                        name + "_scale": torch.stack([p["weight_scale"] for p in parts]),
                        name + "_scale_2": torch.stack([p["weight_scale_2"].reshape(1).repeat(halves) for p in parts]),
                        name[: -len("weight")] + "input_scale": torch.ones(len(parts), halves)})
        return out

    folder = _variant(moe_path, str(tmp_path / "mbridge"), change)
    with pytest.raises(UnsupportedModelError) as error:
        load_model(folder, progress=False)
    message = str(error.value)
    assert message.startswith(os.path.join(folder, "model.safetensors") + ": unsupported model: tensor "
                              "model.language_model.layers.0.mlp.experts.w13_weight: routed experts stored quantized "
                              "under vLLM's fused parameter names (w13_weight, w13_weight_scale, w13_weight_scale_2, "
                              "w13_input_scale) are not read"), message


def _vllm_merged(weights):
    """vLLM's merged Linears as a vLLM-dumped checkpoint stores them: q/k/v_proj rows in self_attn.qkv_proj,
    gate/up_proj rows in gate_up_proj, Qwen3.5's GDN in_proj_qkv / _z rows in in_proj_qkvz and in_proj_b / _a in
    in_proj_ba, each in vLLM qwen3_5.py's stacked_params_mapping order, and its fused expert names."""
    out = _vllm_names(weights)
    for merged, parts in (("qkv_proj", ("q_proj", "k_proj", "v_proj")), ("gate_up_proj", ("gate_proj", "up_proj")),
                          ("in_proj_qkvz", ("in_proj_qkv", "in_proj_z")), ("in_proj_ba", ("in_proj_b", "in_proj_a"))):
        for name in [n for n in out if n.endswith(f".{parts[0]}.weight")]:
            names = [name.replace(f".{parts[0]}.", f".{p}.") for p in parts]
            out[name.replace(f".{parts[0]}.", f".{merged}.")] = torch.cat([out.pop(n) for n in names])
    return out


@pytest.mark.parametrize("arch", ["qwen3_5", "qwen3_5_moe"])
def test_vllm_merged_linears_load(tmp_path, arch):
    """self_attn.qkv_proj, (shared_expert.)gate_up_proj and the GDN's in_proj_qkvz / in_proj_ba compute what the split
    Linears do. Before: MissingTensorError for mlp.gate_proj.weight / shared_expert.gate_proj.weight, tensors such a
    checkpoint never has, after reading vLLM's in_proj_qkvz rows as Qwen3-Next's per-key-head grouping."""
    src = str(tmp_path / "src")
    write_tiny_checkpoint(src, arch=arch)
    folder = _variant(src, str(tmp_path / "vllm"), _vllm_merged)
    names = load_file(os.path.join(folder, "model.safetensors"))
    assert any(n.endswith("self_attn.qkv_proj.weight") for n in names) and not any(n.endswith("q_proj.weight")
                                                                                  for n in names)
    assert any(n.endswith("gate_up_proj.weight") for n in names)
    torch.testing.assert_close(_logits(folder), _logits(src), rtol=0, atol=0)


def test_vllm_merged_quantized_linear_is_refused_naming_it(moe_path, tmp_path):
    def change(weights):
        out = _vllm_merged(weights)
        name = next(n for n in out if n.endswith("self_attn.qkv_proj.weight"))
        for key, value in naive.quantize(out.pop(name).float(), "modelopt").items():
            out[f"{name[: -len('.weight')]}.{key}"] = value
        return out

    folder = _variant(moe_path, str(tmp_path / "nvfp4"), change)
    with pytest.raises(UnsupportedModelError) as error:
        load_model(folder, progress=False)
    assert "self_attn.qkv_proj.weight: vLLM's merged qkv_proj stored quantized is not read; its parts (q_proj, "\
           "k_proj, v_proj) are read quantized stored one Linear each" in str(error.value), str(error.value)


@pytest.mark.parametrize("arch", ["qwen3_5", "qwen3_5_moe"])
def test_vllm_parameter_prefixes_load(tmp_path, arch):
    """A checkpoint under vLLM's own parameter names (its Qwen3.5 hf_to_vllm_mapper: model.language_model. ->
    language_model.model., lm_head. -> language_model.lm_head.) with its merged Linears computes what the
    transformers layout does. Before: MissingTensorError for model.language_model.embed_tokens.weight."""
    src = str(tmp_path / "src")
    write_tiny_checkpoint(src, arch=arch)
    prefixes = {"model.language_model.": "language_model.model.", "lm_head.": "language_model.lm_head."}

    def change(weights):
        renamed = {}
        for name, tensor in _vllm_merged(weights).items():
            old = next((p for p in prefixes if name.startswith(p)), "")
            renamed[prefixes.get(old, "") + name[len(old):]] = tensor
        return renamed

    folder = _variant(src, str(tmp_path / "vllm"), change)
    names = load_file(os.path.join(folder, "model.safetensors"))
    assert "language_model.model.embed_tokens.weight" in names and not any(n.startswith("model.") for n in names)
    torch.testing.assert_close(_logits(folder), _logits(src), rtol=0, atol=0)
