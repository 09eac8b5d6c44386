"""Unit tests (CPU): config.json variants real checkpoints carry (RoPE scaling, legacy rope_scaling, absent rope or
head_dim, attention_bias) give transformers' logits on the same weights, or are refused by name at load."""
import json
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.config import ModelConfig
from worker.loader import UnsupportedModelError, load_model

transformers = pytest.importorskip("transformers")
BASE = {"model_type": "qwen3_5_text", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
        "linear_value_head_dim": 16, "full_attention_interval": 2}
NEXT = dict(BASE, model_type="qwen3_next", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
            shared_expert_intermediate_size=48)
YARN = {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 8}


def _checkpoint(folder, config: dict, next_arch: bool = False):
    """transformers' model of `config` with perturbed random weights, saved; config.json replaced by `config` as
    written (save_pretrained would write its standardised form). Returns the transformers model."""
    cls, config_cls = ((transformers.Qwen3NextForCausalLM, transformers.Qwen3NextConfig) if next_arch else
                       (transformers.Qwen3_5ForCausalLM, transformers.Qwen3_5TextConfig))
    torch.manual_seed(0)
    model = cls(config_cls(**json.loads(json.dumps(config)))).eval().float()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    model.save_pretrained(folder)
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    return model


def _max_rel_error(folder, reference, num_tokens=40) -> float:
    model, config = load_model(folder, progress=False)
    ids = torch.randint(0, config.vocab_size, (num_tokens,), generator=torch.Generator().manual_seed(1))
    cache = ModelCache(config, num_blocks=4, block_size=16, num_slots=1, device="cpu", dtype=torch.float32)
    got = model(ForwardBatch.from_rows([(ids.tolist(), 0, 0, [2, 0, 3], True)], 16), cache, all_logits=True)
    with torch.no_grad():
        want = reference(ids[None]).logits[0].float()
    return ((got - want).abs().max() / want.abs().max()).item()


VARIANTS = {
    "yarn": (dict(BASE, rope_parameters=YARN), False),
    "yarn-mscale-beta": (dict(BASE, rope_parameters=dict(YARN, mscale=1.0, mscale_all_dim=0.5, beta_fast=16,
                                                         beta_slow=2, truncate=False)), False),
    "yarn-attention-factor-no-original": (dict(BASE, max_position_embeddings=16, rope_parameters={
        "rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0, "attention_factor": 1.3}), False),
    "legacy-rope-scaling-linear": (dict(BASE, rope_theta=5e5, rope_scaling={"type": "linear", "factor": 2.0}), False),
    "no-rope-fields": (BASE, False),
    "no-head-dim": ({k: v for k, v in BASE.items() if k != "head_dim"}, False),
    "next-yarn-rope-scaling": (dict(NEXT, rope_theta=1e6, rope_scaling=YARN), True),
    "next-no-head-dim-no-rope": ({k: v for k, v in NEXT.items() if k != "head_dim"}, True),
    # transformers' ACT2FN "swish" is nn.SiLU, silu under its other name (the MLP's and the GDN conv's activation)
    "hidden-act-swish": (dict(BASE, hidden_act="swish"), False),
    "next-hidden-act-swish": (dict(NEXT, hidden_act="swish"), True),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_config_variant_gives_transformers_logits(name, tmp_path):
    config, next_arch = VARIANTS[name]
    reference = _checkpoint(str(tmp_path), config, next_arch)
    assert _max_rel_error(str(tmp_path), reference) < 1e-4


@pytest.mark.parametrize("change, words", [
    ({"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e4, "factor": 4.0}}, "rope_type 'dynamic'"),
    ({"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
                       "original_max_position_embeddings": 8}}, "rope_type 'longrope'"),
    ({"attention_bias": True}, "attention_bias"),
], ids=["dynamic", "longrope", "attention-bias"])
def test_variant_computed_otherwise_is_refused_by_name(change, words, tmp_path):
    _checkpoint(str(tmp_path), dict(BASE, **change))
    with pytest.raises(UnsupportedModelError, match=words):
        load_model(str(tmp_path), progress=False)


@pytest.mark.parametrize("layout", ["text-flag", "top-level-flag"])
def test_tied_config_with_a_different_stored_lm_head_uses_it_as_transformers_does(layout, tmp_path):
    """tie_word_embeddings true, yet the checkpoint stores an lm_head unlike the embedding: transformers keeps it."""
    reference = _checkpoint(str(tmp_path), BASE)
    assert "lm_head.weight" in load_file(os.path.join(str(tmp_path), "model.safetensors"))
    config = {"model_type": "qwen3_5", "text_config": dict(BASE, model_type="qwen3_5_text")}
    (config["text_config"] if layout == "text-flag" else config)["tie_word_embeddings"] = True
    with open(os.path.join(str(tmp_path), "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    hf = transformers.Qwen3_5ForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32)
    assert torch.equal(hf.lm_head.weight, reference.lm_head.weight)
    assert _max_rel_error(str(tmp_path), reference) < 1e-4


def test_tied_config_with_the_embedding_stored_as_lm_head_too_keeps_one_tensor(tmp_path):
    reference = _checkpoint(str(tmp_path), dict(BASE, tie_word_embeddings=True))
    path = os.path.join(str(tmp_path), "model.safetensors")
    weights = load_file(path)
    weights["lm_head.weight"] = weights["model.embed_tokens.weight"].clone()
    save_file(weights, path)
    model, _ = load_model(str(tmp_path), progress=False)
    assert model.lm_head.weight.data_ptr() == model.embed_tokens.data_ptr()
    assert _max_rel_error(str(tmp_path), reference) < 1e-4


def test_head_missing_and_only_text_config_saying_tied_is_the_embedding(tmp_path):
    """A VLM wrapper whose top level says untied (or nothing) while text_config says tied, without lm_head.weight:
    transformers' Qwen3_5ForCausalLM (text_config) ties it; before, the top-level false made it a missing tensor."""
    reference = _checkpoint(str(tmp_path), dict(BASE, tie_word_embeddings=True))
    assert "lm_head.weight" not in load_file(os.path.join(str(tmp_path), "model.safetensors"))
    config = {"model_type": "qwen3_5", "tie_word_embeddings": False,
              "text_config": dict(BASE, model_type="qwen3_5_text", tie_word_embeddings=True)}
    with open(os.path.join(str(tmp_path), "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    assert _max_rel_error(str(tmp_path), reference) < 1e-4


@pytest.mark.parametrize("config_cls, raw", [
    ("Qwen3_5TextConfig", BASE), ("Qwen3NextConfig", NEXT),
    ("Qwen3_5TextConfig", {"model_type": "qwen3_5", "text_config": BASE}),
], ids=["qwen3_5_text", "qwen3_next", "qwen3_5-wrapper"])
def test_absent_fields_take_transformers_defaults(config_cls, raw):
    """max_position_embeddings (the served context), rope_theta, partial_rotary_factor and head_dim absent from
    config.json: transformers' config classes' defaults."""
    text = {k: v for k, v in raw.get("text_config", raw).items() if k != "head_dim"}
    ours = ModelConfig.from_dict(dict(raw, text_config=text) if "text_config" in raw else text)
    hf = getattr(transformers, config_cls)(**text)
    assert ours.max_position_embeddings == hf.max_position_embeddings == 32768
    assert (ours.rope_theta, ours.partial_rotary_factor) == (hf.rope_parameters["rope_theta"],
                                                           hf.rope_parameters["partial_rotary_factor"])
    assert ours.head_dim == hf.head_dim and ours.rms_norm_eps == hf.rms_norm_eps
    assert ours.layer_types == hf.layer_types


@pytest.mark.parametrize("method", ["gptq", "awq", "bitsandbytes"])
def test_quantization_the_loader_does_not_read_is_refused_by_its_method(method, tmp_path):
    """A GPTQ / AWQ / bitsandbytes checkpoint (here GPTQ's qweight / qzeros / scales in place of an up_proj) is
    refused naming its quant_method, where it failed on the first Linear as a missing `weight` tensor."""
    _checkpoint(str(tmp_path), BASE)
    path = os.path.join(str(tmp_path), "model.safetensors")
    weights = load_file(path)
    for name in [n for n in weights if n.endswith("mlp.up_proj.weight")]:
        rows, cols = weights.pop(name).shape
        base = name[: -len("weight")]
        weights[base + "qweight"] = torch.zeros(cols // 8, rows, dtype=torch.int32)
        weights[base + "qzeros"] = torch.zeros(1, rows // 8, dtype=torch.int32)
        weights[base + "scales"] = torch.ones(1, rows, dtype=torch.float16)
    save_file(weights, path)
    with open(os.path.join(str(tmp_path), "config.json"), "w", encoding="utf-8") as f:
        json.dump(dict(BASE, quantization_config={"quant_method": method, "bits": 4, "group_size": 128}), f)
    with pytest.raises(UnsupportedModelError, match=f"quantization_config quant_method '{method}'"):
        load_model(str(tmp_path), progress=False)


# the fields that were required (a KeyError, "bad or missing field") though transformers' config classes default them
DEFAULTED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
             "linear_value_head_dim", "head_dim", "linear_conv_kernel_dim", "layer_types", "rms_norm_eps",
             "max_position_embeddings", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
             "shared_expert_intermediate_size")


@pytest.mark.parametrize("config_cls, model_type", [
    ("Qwen3_5TextConfig", "qwen3_5_text"), ("Qwen3_5MoeTextConfig", "qwen3_5_moe_text"),
    ("Qwen3NextConfig", "qwen3_next"),
])
def test_config_json_of_a_model_type_alone_reads_as_transformers_defaults(config_cls, model_type):
    """Every field left out takes its transformers default (configuration_qwen3_5.py, configuration_qwen3_5_moe.py,
    configuration_qwen3_next.py); vocab_size, hidden_size, the head counts and the linear_* fields were refused."""
    ours = ModelConfig.from_dict({"model_type": model_type})
    hf = getattr(transformers, config_cls)()
    for name in DEFAULTED:
        # Qwen3_5MoeTextConfig has no intermediate_size (no dense MLP) and Qwen3_5TextConfig no experts
        assert getattr(ours, name) == getattr(hf, name, 0), name


def test_all_attention_checkpoint_without_linear_fields_gives_transformers_logits(tmp_path):
    """An all-attention config.json that leaves out the linear_* fields (no GDN layer reads them) and
    num_key_value_heads (transformers' default 4) loads as transformers loads it, instead of 'bad or missing field'."""
    config = {k: v for k, v in BASE.items() if not k.startswith("linear_") and k not in ("num_key_value_heads",
                                                                                         "full_attention_interval")}
    config["layer_types"] = ["full_attention"] * config["num_hidden_layers"]
    reference = _checkpoint(str(tmp_path), config)
    assert reference.config.num_key_value_heads == 4
    assert _max_rel_error(str(tmp_path), reference) < 1e-4
