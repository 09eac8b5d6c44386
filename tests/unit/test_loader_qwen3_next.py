"""Unit tests (CPU): loading Qwen3-Next / Qwen3.5-MoE checkpoints: fused qkvz / expert layouts, HF save round trip,
config parsing of the MoE fields, typed errors, the torch-free model card and one ModelRunner step."""
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.config import ModelConfig
from worker.loader import MissingTensorError, TensorShapeError, UnsupportedModelError, load_model
from worker.model_card import load_model_card
from worker.tiny import write_tiny_checkpoint

transformers = pytest.importorskip("transformers")
L0 = "model.layers.0."


@pytest.fixture(scope="module")
def next_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("qwen3_next"))
    write_tiny_checkpoint(path, arch="qwen3_next")
    return path


@pytest.fixture
def copy(next_path, tmp_path):
    dst = str(tmp_path / "ckpt")
    shutil.copytree(next_path, dst)
    return dst


def _read_config(folder):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        return json.load(f)


def _logits(folder, num_tokens=30):
    model, config = load_model(folder, progress=False)
    ids = torch.randint(0, config.vocab_size, (num_tokens,), generator=torch.Generator().manual_seed(3)).tolist()
    cache = ModelCache(config, num_blocks=4, block_size=16, num_slots=1, device="cpu", dtype=torch.float32)
    return model(ForwardBatch.from_rows([(ids, 0, 0, [1, 3], True)], 16), cache, all_logits=True)


def test_fused_qkvz_rows_and_experts_land_where_transformers_puts_them(next_path):
    model, config = load_model(next_path, progress=False)
    hf = transformers.Qwen3NextForCausalLM.from_pretrained(next_path, dtype=torch.float32).eval()
    x = torch.randn(1, 5, config.hidden_size, generator=torch.Generator().manual_seed(0))
    attn, ours = hf.model.layers[0].linear_attn, model.layers[0].mixer
    with torch.no_grad():
        q, k, v, z, b, a = attn.fix_query_key_value_ordering(attn.in_proj_qkvz(x), attn.in_proj_ba(x))
        qkv = torch.cat([t.reshape(1, 5, -1) for t in (q, k, v)], dim=-1)
        torch.testing.assert_close(ours.in_proj_qkv(x), qkv, rtol=0, atol=1e-6)
        torch.testing.assert_close(ours.in_proj_z(x), z.reshape(1, 5, -1), rtol=0, atol=1e-6)
        torch.testing.assert_close(ours.in_proj_b(x), b, rtol=0, atol=1e-6)
        torch.testing.assert_close(ours.in_proj_a(x), a, rtol=0, atol=1e-6)
    experts = hf.model.layers[0].mlp.experts
    assert torch.equal(model.layers[0].mlp.gate_up, experts.gate_up_proj)
    assert torch.equal(model.layers[0].mlp.down, experts.down_proj)
    assert torch.equal(model.layers[1].mlp.up_proj.weight, hf.model.layers[1].mlp.up_proj.weight)


@pytest.mark.parametrize("arch", ["qwen3_next", "qwen3_5_moe"])
def test_transformers_save_pretrained_round_trip(arch, tmp_path):
    """transformers 5.23 saves Qwen3-Next experts per expert (it fuses them only in memory); both load."""
    src, saved = str(tmp_path / "src"), str(tmp_path / "saved")
    write_tiny_checkpoint(src, arch=arch)
    cls = transformers.Qwen3NextForCausalLM if arch == "qwen3_next" else transformers.Qwen3_5MoeForCausalLM
    cls.from_pretrained(src, dtype=torch.float32).save_pretrained(saved)
    names = set(load_file(os.path.join(saved, "model.safetensors")))
    if arch == "qwen3_next":
        assert L0 + "mlp.experts.3.up_proj.weight" in names and L0 + "mlp.experts.gate_up_proj" not in names
        assert L0 + "linear_attn.in_proj_qkvz.weight" in names
    # same values; fp32 tensors straight from the mmap (vs bf16 cast to fp32) may take other BLAS paths
    got, want = _logits(saved), _logits(src)
    assert ((got - want).abs().max() / want.abs().max()).item() < 1e-5


def test_fused_expert_tensors_load_like_per_expert(next_path, copy):
    path = os.path.join(copy, "model.safetensors")
    weights = load_file(path)
    for layer in (0, 2, 3):
        base = f"model.layers.{layer}.mlp.experts."
        gate_up = [torch.cat([weights.pop(f"{base}{e}.gate_proj.weight"), weights.pop(f"{base}{e}.up_proj.weight")])
                   for e in range(4)]
        weights[base + "gate_up_proj"] = torch.stack(gate_up)
        weights[base + "down_proj"] = torch.stack([weights.pop(f"{base}{e}.down_proj.weight") for e in range(4)])
    save_file(weights, path)
    torch.testing.assert_close(_logits(copy), _logits(next_path), rtol=0, atol=0)


def test_missing_and_misshaped_expert_are_named(copy):
    path = os.path.join(copy, "model.safetensors")
    weights = load_file(path)
    name = "model.layers.2.mlp.experts.3.up_proj.weight"
    weights[name] = weights[name][:-8].clone()
    save_file(weights, path)
    with pytest.raises(TensorShapeError, match=name.replace(".", r"\.")) as info:
        load_model(copy, progress=False)
    assert info.value.expected == (64, 64) and info.value.found == (56, 64)
    del weights[name]
    save_file(weights, path)
    with pytest.raises(MissingTensorError, match=name.replace(".", r"\.")):
        load_model(copy, progress=False)


def test_moe_config_fields_and_sparse_layers_match_transformers(next_path):
    raw = _read_config(next_path)
    raw.update(num_hidden_layers=8, layer_types=None, decoder_sparse_step=2, mlp_only_layers=[3], norm_topk_prob=False)
    config = ModelConfig.from_dict(raw)
    hf = transformers.Qwen3NextConfig(**{k: v for k, v in raw.items() if k != "layer_types"})
    modeling = transformers.models.qwen3_next.modeling_qwen3_next
    hf_moe = [isinstance(modeling.Qwen3NextDecoderLayer(hf, i).mlp, modeling.Qwen3NextSparseMoeBlock) for i in range(8)]
    assert [config.is_moe_layer(i) for i in range(8)] == hf_moe == [False, True, False, False, False, True, False, True]
    assert not config.norm_topk_prob and config.moe_intermediate_size == 64 and config.rotary_dim == 8
    assert config.layer_types == hf.layer_types and config.weight_prefix == "model."
    moe = ModelConfig.from_dict({"model_type": "qwen3_5_moe", "text_config": {k: v for k, v in raw.items()
                                                                              if k != "norm_topk_prob"}})
    assert moe.weight_prefix == "model.language_model." and moe.norm_topk_prob
    assert [moe.is_moe_layer(i) for i in range(8)] == [True] * 8, "qwen3_5_moe ignores decoder_sparse_step"


@pytest.mark.parametrize("change, match", [
    ({"model_type": "qwen3_5_moe"}, "without a text_config"),
    ({"num_experts_per_tok": 5}, "num_experts_per_tok"),
    ({"hidden_act": "gelu"}, "hidden_act"),
])
def test_bad_moe_configs_raise_typed_errors(copy, change, match):
    raw = dict(_read_config(copy), **change)
    with open(os.path.join(copy, "config.json"), "w", encoding="utf-8") as f:
        json.dump(raw, f)
    with pytest.raises(UnsupportedModelError, match=match):
        load_model(copy, progress=False)


def test_model_card_and_one_runner_step(next_path):
    card = load_model_card(next_path)
    assert card["model_type"] == "qwen3_next" and card["architecture"] == "Qwen3NextForCausalLM"
    assert card["vocab_size"] == 1024 and card["eos_token_ids"] and card["chat_template"]
    sizes = [t.numel() for t in load_file(os.path.join(next_path, "model.safetensors")).values()]
    assert card["num_parameters"] == sum(sizes)
    pb = pytest.importorskip("proto").pb
    from worker.server import WorkerConfig, build_runner
    runner, hello = build_runner(WorkerConfig(model=next_path, device="cpu", num_state_slots=2))
    assert hello.vocab_size == 1024 and hello.num_slots == 2 and hello.max_context_len == 8192
    model, config = runner.model, runner.config
    step = pb.PackedStep(step_id=1, session_id="s")
    step.new_requests.add(req_id="r", sampling=pb.SamplingParams(temperature=0.0), prompt_token_ids=list(range(5, 25)))
    step.rows.add(req_id="r", num_tokens=20, context_len=0, state_slot=1, block_table=[3, 5], sample=True)
    step.token_ids.extend(range(5, 25))
    result = runner.execute(step)
    assert not result.error, result.error
    want = int(_logits_of(model, config, list(range(5, 25))).argmax())
    assert list(result.token_ids) == [want]


def _logits_of(model, config, ids):
    cache = ModelCache(config, num_blocks=4, block_size=16, num_slots=1, device="cpu", dtype=torch.float32)
    return model(ForwardBatch.from_rows([(ids, 0, 0, [0, 1], True)], 16), cache)[0]
