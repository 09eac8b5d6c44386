"""Unit tests (CPU): checkpoint loading in both layouts, sharding, the fused Qwen3-Next split, and typed errors."""
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.layers.gdn import split_fused_qkvz
from worker.loader import (CheckpointError, MissingFileError, MissingTensorError, TensorShapeError,
                           UnsupportedModelError, load_model)
from worker.tiny import write_tiny_checkpoint

PREFIX = "model.language_model."
QKV = "model.language_model.layers.0.linear_attn.in_proj_qkv.weight"


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return path


@pytest.fixture
def copy(tiny_path, tmp_path):
    dst = str(tmp_path / "ckpt")
    shutil.copytree(tiny_path, dst)
    return dst


def _read_json(folder, name):
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        return json.load(f)


def _write_json(folder, name, obj):
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        json.dump(obj, f)


def _logits(folder):
    model, config = load_model(folder, progress=False)
    ids = torch.randint(0, config.vocab_size, (30,), generator=torch.Generator().manual_seed(3)).tolist()
    cache = ModelCache(config, num_blocks=4, block_size=16, num_slots=1, device="cpu", dtype=torch.float32)
    return model(ForwardBatch.from_rows([(ids, 0, 0, [1, 3], True)], 16), cache, all_logits=True)


def test_loads_real_layout_in_bf16_reading_header_dtypes(tiny_path):
    model, config = load_model(tiny_path, dtype=torch.bfloat16, progress=False)
    assert config.model_type == "qwen3_5" and config.hidden_size % 16 == 0
    assert config.attention_layer_ids == [3, 7] and config.gdn_layer_ids == [0, 1, 2, 4, 5, 6]
    assert config.linear_num_value_heads == 2 * config.linear_num_key_heads
    assert config.max_position_embeddings >= 8192 and config.rotary_dim == 8
    on_disk = load_file(os.path.join(tiny_path, "model.safetensors"))
    a_log = on_disk[PREFIX + "layers.0.linear_attn.A_log"]
    assert a_log.dtype == torch.float32 and on_disk[QKV].dtype == torch.bfloat16
    assert model.embed_tokens.dtype == torch.bfloat16
    assert torch.equal(model.layers[0].mixer.A_log, a_log.to(torch.bfloat16))
    assert torch.equal(model.layers[0].mixer.in_proj_qkv.weight, on_disk[QKV])


def test_missing_folder_and_config(tmp_path, copy):
    with pytest.raises(MissingFileError, match="does-not-exist"):
        load_model(str(tmp_path / "does-not-exist"), progress=False)
    os.remove(os.path.join(copy, "config.json"))
    with pytest.raises(MissingFileError, match="config.json"):
        load_model(copy, progress=False)


def test_unsupported_model_type_names_file_and_type(copy):
    raw = _read_json(copy, "config.json")
    raw["model_type"] = "llama"
    _write_json(copy, "config.json", raw)
    with pytest.raises(UnsupportedModelError, match=r"config\.json.*'llama'"):
        load_model(copy, progress=False)


def test_moe_model_is_refused(copy):
    raw = _read_json(copy, "config.json")
    raw["text_config"]["num_experts"] = 8
    _write_json(copy, "config.json", raw)
    with pytest.raises(UnsupportedModelError, match="MoE"):
        load_model(copy, progress=False)


def test_missing_weights_and_missing_shard(copy):
    os.rename(os.path.join(copy, "model.safetensors"), os.path.join(copy, "weights.bin"))
    with pytest.raises(MissingFileError, match="model.safetensors"):
        load_model(copy, progress=False)
    _write_json(copy, "model.safetensors.index.json", {"weight_map": {QKV: "model-00001-of-00002.safetensors"}})
    with pytest.raises(MissingFileError, match="model-00001-of-00002.safetensors"):
        load_model(copy, progress=False)


def test_wrong_shape_names_tensor_expected_and_found(copy):
    path = os.path.join(copy, "model.safetensors")
    weights = load_file(path)
    expected = list(weights[QKV].shape)
    weights[QKV] = weights[QKV][:-16].clone()
    save_file(weights, path)
    with pytest.raises(TensorShapeError) as info:
        load_model(copy, progress=False)
    found = [expected[0] - 16, expected[1]]
    assert QKV in str(info.value) and str(expected) in str(info.value) and str(found) in str(info.value)
    assert "model.safetensors" in str(info.value)


def test_missing_tensor_is_named(copy):
    path = os.path.join(copy, "model.safetensors")
    weights = load_file(path)
    name = "model.language_model.layers.3.self_attn.k_norm.weight"
    del weights[name]
    save_file(weights, path)
    with pytest.raises(MissingTensorError, match=name.replace(".", r"\.")) as info:
        load_model(copy, progress=False)
    assert isinstance(info.value, CheckpointError)


@pytest.mark.parametrize("arch, missing", [("qwen3_5", "in_proj_z"), ("qwen3_5", "in_proj_a"),
                                             ("qwen3_next", "in_proj_qkvz"), ("qwen3_next", "in_proj_ba")])
def test_missing_gdn_projection_is_named_as_the_checkpoint_kind_stores_it(tmp_path, arch, missing):
    """A Qwen3.5 checkpoint without one of its split GDN projections: the error names that tensor, where it named
    Qwen3-Next's fused in_proj_qkvz / in_proj_ba, which no Qwen3.5 checkpoint holds. Qwen3-Next names its fused one."""
    folder = str(tmp_path / arch)
    write_tiny_checkpoint(folder, arch=arch)
    path = os.path.join(folder, "model.safetensors")
    weights = load_file(path)
    name = next(n for n in weights if n.endswith(f"layers.0.linear_attn.{missing}.weight"))
    del weights[name]
    save_file(weights, path)
    with pytest.raises(MissingTensorError) as info:
        load_model(folder, progress=False)
    assert info.value.name == name


def test_sharded_text_only_layout_skips_visual_and_mtp(tiny_path, copy):
    reference = _logits(tiny_path)
    raw = _read_json(copy, "config.json")
    text = dict(raw["text_config"], model_type="qwen3_5_text", architectures=["Qwen3_5ForCausalLM"])
    text.pop("rope_parameters")
    text.update(rope_theta=10000000.0, partial_rotary_factor=0.25)
    text.pop("layer_types")
    _write_json(copy, "config.json", text)
    weights = {n.replace(PREFIX, "model."): t for n, t in load_file(os.path.join(copy, "model.safetensors")).items()}
    os.remove(os.path.join(copy, "model.safetensors"))
    weights["mtp.fc.weight"] = torch.ones(2, 2)
    weights["model.visual.patch_embed.weight"] = torch.ones(3)
    names = sorted(weights)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, members in shards.items():
        save_file({n: weights[n] for n in members}, os.path.join(copy, shard))
    index = {"weight_map": {n: s for s, members in shards.items() for n in members}}
    _write_json(copy, "model.safetensors.index.json", index)
    torch.testing.assert_close(_logits(copy), reference, atol=0, rtol=0)


def _fuse(qkv, z, b, a, num_k_heads, head_k_dim):
    """Inverse of split_fused_qkvz: Qwen3-Next per-key-head grouping [q_g, k_g, v_g, z_g] and [b_g, a_g]."""
    key_dim = num_k_heads * head_k_dim
    q, k, v = qkv[:key_dim], qkv[key_dim:2 * key_dim], qkv[2 * key_dim:]
    per = [t.view(num_k_heads, -1, t.shape[-1]) for t in (q, k, v, z, b, a)]
    return torch.cat(per[:4], dim=1).reshape(-1, qkv.shape[-1]), torch.cat(per[4:], dim=1).reshape(-1, qkv.shape[-1])


def test_fused_qkvz_layout_is_split_at_load(tiny_path, copy):
    reference = _logits(tiny_path)
    path = os.path.join(copy, "model.safetensors")
    weights = load_file(path)
    for layer in (0, 1, 2, 4, 5, 6):
        p = f"{PREFIX}layers.{layer}.linear_attn."
        parts = [weights.pop(p + n + ".weight") for n in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")]
        weights[p + "in_proj_qkvz.weight"], weights[p + "in_proj_ba.weight"] = _fuse(*parts, 2, 32)
        split = split_fused_qkvz(weights[p + "in_proj_qkvz.weight"], weights[p + "in_proj_ba.weight"], 2, 32, 32, 4)
        assert all(torch.equal(split[n], t) for n, t in zip(("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"),
                                                            parts))
    save_file(weights, path)
    torch.testing.assert_close(_logits(copy), reference, atol=0, rtol=0)
