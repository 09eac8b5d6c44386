"""Unit tests (CPU): block-scaled FP8 checkpoints as Qwen publishes them (-FP8: quant_method fp8, weight_block_size,
float8_e4m3fn `weight` beside a `weight_scale_inv` grid) give the logits of transformers' model on the weights
transformers' own Fp8Dequantize recovers (integrations/finegrained_fp8.py, the path from_pretrained takes on CPU)."""
import copy
import json
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.unit.test_config_variants import BASE, NEXT, _checkpoint, _max_rel_error
from worker.loader import UnsupportedModelError, load_model

transformers = pytest.importorskip("transformers")
Fp8Dequantize = pytest.importorskip("transformers.integrations.finegrained_fp8").Fp8Dequantize
QUANTIZED = ("mlp.up_proj.weight", "mlp.down_proj.weight", "self_attn.q_proj.weight", "self_attn.o_proj.weight",
             "linear_attn.in_proj_qkv.weight", "linear_attn.out_proj.weight", "shared_expert.gate_proj.weight",
             "experts.0.up_proj.weight", "linear_attn.in_proj_qkvz.weight")


def _quantize_blocks(weight: torch.Tensor, block: int):
    """[N, K] -> (float8_e4m3fn codes, f32 scale grid [N / block, K / block]): each block's amax maps to 448."""
    n, k = weight.shape
    blocks = weight.float().reshape(n // block, block, k // block, block)
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / 448.0
    codes = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn).reshape(n, k)
    return codes, scale


def _param_of(state: dict, name: str) -> torch.Tensor:
    """The transformers parameter (or slice of one) that disk tensor `name` loads into: an expert's up_proj is the
    second half of the fused experts.gate_up_proj [E, 2I, D] (Qwen3-Next saves experts one by one)."""
    if name in state:
        return state[name]
    experts, expert, _up_proj, _weight = name.rsplit(".", 3)
    fused = state[experts + ".gate_up_proj"][int(expert)]
    return fused[fused.shape[0] // 2:]


def _fp8_checkpoint(folder: str, config: dict, next_arch: bool, block: int):
    """The checkpoint of `config` with the QUANTIZED Linears stored block FP8; returns transformers' model holding
    the weights Fp8Dequantize reads back from them (the oracle)."""
    reference = copy.deepcopy(_checkpoint(folder, config, next_arch))
    path = os.path.join(folder, "model.safetensors")
    weights = load_file(path)
    state = reference.state_dict()
    with torch.no_grad():
        for name in [n for n in weights if n.endswith(QUANTIZED)]:
            codes, scale = _quantize_blocks(weights[name], block)
            weights[name], weights[name + "_scale_inv"] = codes, scale
            _param_of(state, name).copy_(Fp8Dequantize(None)._dequantize_one(codes, scale, torch.float32))
    save_file(weights, path, metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(dict(config, quantization_config={"quant_method": "fp8", "fmt": "e4m3", "activation_scheme":
                                                    "dynamic", "weight_block_size": [block, block]}), f)
    return reference


@pytest.mark.parametrize("config, next_arch", [(BASE, False), (NEXT, True)], ids=["qwen3_5", "qwen3_next"])
def test_block_fp8_checkpoint_gives_transformers_dequantized_logits(config, next_arch, tmp_path):
    reference = _fp8_checkpoint(str(tmp_path), config, next_arch, block=16)
    assert _max_rel_error(str(tmp_path), reference) < 1e-4


def test_block_size_that_does_not_tile_the_grid_is_refused_by_name(tmp_path):
    """weight_block_size [32, 32] while the stored grids are of 16-blocks: refused naming the tensor, not misread."""
    _fp8_checkpoint(str(tmp_path), BASE, False, block=16)
    config_path = os.path.join(str(tmp_path), "config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    config["quantization_config"]["weight_block_size"] = [32, 32]
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    with pytest.raises(UnsupportedModelError, match=r"tensor model\.layers\.\d+\.\S+_proj\S*\.weight: FP8 scale grid"):
        load_model(str(tmp_path), progress=False)


def test_fused_fp8_experts_give_transformers_dequantized_logits(tmp_path):
    """Qwen3.5-MoE as transformers saves it: experts.gate_up_proj [E, 2I, D] / experts.down_proj in FP8 with one
    `*_scale_inv` grid per expert (transformers' FP8Experts); before, the codes were served without their scales."""
    config = dict(BASE, model_type="qwen3_5_moe_text", num_experts=4, num_experts_per_tok=2,
                  moe_intermediate_size=32, shared_expert_intermediate_size=48)
    folder = str(tmp_path)
    torch.manual_seed(0)
    reference = transformers.Qwen3_5MoeForCausalLM(transformers.Qwen3_5MoeTextConfig(**config)).eval().float()
    with torch.no_grad():
        for param in reference.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    reference.save_pretrained(folder)
    path = os.path.join(folder, "model.safetensors")
    # transformers 5 saves experts one by one; the fused layout is its in-memory one, written as such here
    weights = {n: t for n, t in load_file(path).items() if ".experts." not in n}
    state = reference.state_dict()
    fused = [n for n in state if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]
    assert fused
    with torch.no_grad():
        for name in fused:
            pairs = [_quantize_blocks(expert, 16) for expert in state[name]]
            codes, grids = torch.stack([c for c, _ in pairs]), torch.stack([g for _, g in pairs])
            weights[name], weights[name + "_scale_inv"] = codes, grids
            state[name].copy_(Fp8Dequantize(None)._dequantize_one(codes, grids, torch.float32))
    save_file(weights, path, metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(dict(config, quantization_config={"quant_method": "fp8", "weight_block_size": [16, 16]}), f)
    assert _max_rel_error(folder, reference) < 1e-4


def test_fp8_codes_without_a_scale_are_refused_by_name(tmp_path):
    """An FP8 weight whose scale the loader does not read (here: none stored) is refused, never served as weights."""
    _checkpoint(str(tmp_path), BASE)
    path = os.path.join(str(tmp_path), "model.safetensors")
    weights = load_file(path)
    weights["model.layers.1.self_attn.o_proj.weight"] = weights["model.layers.1.self_attn.o_proj.weight"].to(
        torch.float8_e4m3fn)
    save_file(weights, path, metadata={"format": "pt"})
    with pytest.raises(UnsupportedModelError, match=r"tensor model\.layers\.1\.self_attn\.o_proj\.weight is stored "
                                                    r"as torch\.float8_e4m3fn without a scale"):
        load_model(str(tmp_path), progress=False)


def test_compressed_tensors_block_fp8_with_a_partial_last_block(tmp_path):
    """llm-compressor's FP8 block scheme (format float-quantized, `weight_scale` grid, block_structure [64, 64]) on
    [96, 64] / [64, 96] MLP weights: the last block row (or column) is partial, as vLLM's block FP8 reads it; the
    grid alone (2 rows for 96) would give blocks of 48, so the block comes from the config."""
    reference = copy.deepcopy(_checkpoint(str(tmp_path), BASE))
    path = os.path.join(str(tmp_path), "model.safetensors")
    weights, state = load_file(path), reference.state_dict()
    with torch.no_grad():
        for name in [n for n in weights if n.endswith(("mlp.up_proj.weight", "mlp.down_proj.weight"))]:
            n, k = weights[name].shape
            padded = torch.nn.functional.pad(weights[name], (0, -k % 64, 0, -n % 64))
            codes, grid = _quantize_blocks(padded, 64)
            weights[name], weights[name[:-len("weight")] + "weight_scale"] = codes[:n, :k].contiguous(), grid
            state[name].copy_(Fp8Dequantize(None)._dequantize_one(codes, grid, torch.float32)[:n, :k])
    save_file(weights, path, metadata={"format": "pt"})
    group = {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                                                "block_structure": [64, 64]}}
    with open(os.path.join(str(tmp_path), "config.json"), "w", encoding="utf-8") as f:
        json.dump(dict(BASE, quantization_config={"quant_method": "compressed-tensors", "format": "float-quantized",
                                                  "config_groups": {"group_0": group}, "ignore": ["lm_head"]}), f)
    assert _max_rel_error(str(tmp_path), reference) < 1e-4
