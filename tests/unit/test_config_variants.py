"""Unit tests (CPU): config.json variants real checkpoints carry (RoPE scaling, legacy rope_scaling, absent rope or
head_dim, attention_bias) give transformers' logits on the same weights, or are refused by name at load."""
import json
import os

import pytest
import torch

from worker.batch import ForwardBatch
from worker.cache import ModelCache
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
