"""The ignore / exclude_modules patterns real NVFP4 recipes write, read as ModelOpt (fnmatch wildcards over the whole
module name: vLLM modelopt.py is_layer_excluded) and compressed-tensors (`re:` regexes, re.match) read them.
Before, only a trailing `*` was a wildcard: `*linear_attn*` or `model.layers.*.mlp.gate` matched nothing, and the
layers they leave in bf16 read as NVFP4."""
import json

import pytest

from kernels.nvfp4 import checkpoint

GDN = "model.layers.0.linear_attn.in_proj_qkvz"
ROUTER = "model.layers.3.mlp.gate"
UP = "model.layers.3.mlp.gate_proj"
VISUAL = "model.visual.blocks.0.attn.qkv"


def _config(tmp_path, quantization_config: dict) -> checkpoint.QuantConfig:
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": quantization_config}))
    return checkpoint.read_quant_config(str(tmp_path))


@pytest.mark.parametrize("patterns, left_bf16, quantized", [
    # Model-Optimizer hf_ptq's Qwen3-Next / Qwen3.5 exclusions (*linear_attn*, *visual*: NVIDIA/Model-Optimizer#681,
    # #1687) and its per-module --exclude_modules form
    (["lm_head", "*linear_attn*", "*visual*"], [GDN, VISUAL, "lm_head"], [UP, ROUTER]),
    # nvidia/*-NVFP4 hf_quant_config.json: the routers of every layer, without or with the layer wildcard
    (["model.layers.*.mlp.gate", "lm_head"], [ROUTER], [UP, GDN]),
    (["*mlp.gate", "*shared_expert_gate"], [ROUTER, "model.layers.3.mlp.shared_expert_gate"], [UP, GDN]),
    # a module subtree (vLLM's apply_vllm_mapper: `module_path*` = module_path and everything below it)
    (["model.layers.0.linear_attn*"], [GDN, "model.layers.0.linear_attn"], ["model.layers.1.linear_attn.out_proj"]),
    # a plain trailing name, as before
    (["mlp.gate"], [ROUTER], [UP]),
], ids=["modelopt-subtrees", "layer-wildcard", "leading-wildcard", "trailing-star", "trailing-name"])
def test_modelopt_wildcards(tmp_path, patterns, left_bf16, quantized):
    qc = _config(tmp_path, {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": patterns})
    assert {m: qc.algo_of(m) for m in left_bf16 + quantized} == \
        {**{m: "bf16" for m in left_bf16}, **{m: "NVFP4" for m in quantized}}


def test_legacy_exclude_modules_wildcards(tmp_path):
    """hf_quant_config.json's exclude_modules are the same wildcards."""
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {"quant_algo": "NVFP4", "exclude_modules": ["model.layers.*.linear_attn*", "lm_head"]}}))
    qc = checkpoint.read_quant_config(str(tmp_path))
    assert [qc.algo_of(m) for m in (GDN, "model.layers.1.linear_attn.out_proj", UP)] == ["bf16", "bf16", "NVFP4"]


def test_compressed_tensors_regexes(tmp_path):
    """llm-compressor's Qwen3.5 / 3.6 NVFP4 examples ignore `re:.*mlp.gate$` and `re:.*linear_attn.*`: matched with
    re.match, anchored at the start only, so `mlp.gate$` leaves gate_proj quantized."""
    qc = _config(tmp_path, {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
                            "ignore": ["lm_head", "re:.*mlp.gate$", "re:.*linear_attn.*"]})
    assert {m: qc.algo_of(m) for m in (ROUTER, GDN, UP, "lm_head")} == \
        {ROUTER: "bf16", GDN: "bf16", UP: "NVFP4", "lm_head": "bf16"}
