"""Unit tests (CPU): the tiny checkpoint generator, its tokenizer, the torch-free model card and config parsing."""
import filecmp
import json
import os
import subprocess
import sys
import unicodedata

import pytest
from tokenizers import Tokenizer

from worker.checkpoint_errors import MissingFileError, UnsupportedModelError
from worker.config import ModelConfig
from worker.model_card import load_model_card
from worker.tiny import ADDED_TOKENS, TEMPLATE_PATH, write_tiny_checkpoint

FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return path


def test_generator_is_byte_identical_across_runs(tiny_path, tmp_path):
    write_tiny_checkpoint(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == FILES
    match, mismatch, errors = filecmp.cmpfiles(tiny_path, str(tmp_path), FILES, shallow=False)
    assert match == FILES and not mismatch and not errors
    assert os.path.getsize(os.path.join(tiny_path, "model.safetensors")) < 8 * 2**20


@pytest.mark.parametrize("text", ["Hello, world!", "你好，世界 こんにちは 안녕", "emoji 🤖🚀👍🏽 ❤️", "tabs\tand\r\nnewlines  ",
                                  "rare bytes \u0000\u00ff \U0001f9ea zalgo e\u0301"],
                         ids=["ascii", "cjk", "emoji", "whitespace", "rare"])
def test_tokenizer_round_trips_any_utf8(tiny_path, text):
    tok = Tokenizer.from_file(os.path.join(tiny_path, "tokenizer.json"))
    ids = tok.encode(text).ids
    assert tok.decode(ids, skip_special_tokens=False) == unicodedata.normalize("NFC", text)


def test_added_tokens_are_single_ids_after_the_trained_vocab(tiny_path):
    tok = Tokenizer.from_file(os.path.join(tiny_path, "tokenizer.json"))
    trained = tok.get_vocab_size(with_added_tokens=False)
    ids = [tok.token_to_id(content) for content, _ in ADDED_TOKENS]
    assert ids == list(range(trained, trained + len(ADDED_TOKENS)))
    text = "<|im_start|>user\nhi<|im_end|><tool_call></tool_call><think></think>"
    encoded = tok.encode(text).ids
    for content in ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>"):
        assert tok.token_to_id(content) in encoded
    assert tok.decode(encoded, skip_special_tokens=True) == "user\nhi<tool_call></tool_call><think></think>"


def test_model_card_reads_ids_template_and_tokenizer(tiny_path):
    card = load_model_card(tiny_path)
    tok = Tokenizer.from_file(os.path.join(tiny_path, "tokenizer.json"))
    assert sorted(card["eos_token_ids"]) == sorted([tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")])
    with open(TEMPLATE_PATH, encoding="utf-8") as f:
        assert card["chat_template"] == f.read()
    with open(os.path.join(tiny_path, "tokenizer.json"), "rb") as f:
        assert card["tokenizer_json"] == f.read()
    assert card["max_context_len"] >= 8192 and card["vocab_size"] == tok.get_vocab_size()
    assert card["architecture"] == "Qwen3_5ForConditionalGeneration"
    assert json.loads(card["generation_config_json"])["eos_token_id"] == card["eos_token_ids"]
    assert 100_000 < card["num_parameters"] < 2_000_000


def test_model_card_does_not_import_torch(tiny_path):
    code = ("import sys; from worker.model_card import load_model_card; "
            f"load_model_card({tiny_path!r}); assert 'torch' not in sys.modules, 'torch imported'")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_model_card_errors_name_the_file(tmp_path, tiny_path):
    with pytest.raises(MissingFileError, match="config.json"):
        load_model_card(str(tmp_path))
    with open(os.path.join(tiny_path, "config.json"), encoding="utf-8") as f:
        (tmp_path / "config.json").write_text(f.read())
    with pytest.raises(MissingFileError, match="tokenizer.json"):
        load_model_card(str(tmp_path))


def _text_config(**extra):
    base = {"model_type": "qwen3_5_text", "vocab_size": 32, "hidden_size": 64, "num_hidden_layers": 6,
            "num_attention_heads": 4, "num_key_value_heads": 2, "linear_num_key_heads": 2,
            "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16}
    return dict(base, **extra)


def test_config_fallbacks_interval_legacy_rope_and_head_dim():
    config = ModelConfig.from_dict(_text_config(full_attention_interval=3, rope_theta=5e6, partial_rotary_factor=0.5))
    assert config.layer_types[2] == config.layer_types[5] == "full_attention"
    assert config.attention_layer_ids == [2, 5] and config.rope_theta == 5e6
    # an absent head_dim is transformers' Qwen3_5TextConfig default 256, not hidden_size // heads
    assert config.head_dim == 256 and config.rotary_dim == 128 and config.weight_prefix == "model."
    nested = ModelConfig.from_dict({"model_type": "qwen3_5", "eos_token_id": 7, "text_config": _text_config(
        eos_token_id=5, rope_parameters={"rope_theta": 1e4, "partial_rotary_factor": 0.25}, rope_theta=99.0)})
    assert nested.rope_theta == 1e4 and nested.eos_token_ids == [7, 5]
    assert nested.layer_types[3] == "full_attention" and nested.weight_prefix == "model.language_model."


def test_config_errors_are_typed():
    with pytest.raises(UnsupportedModelError, match="'gpt2'"):
        ModelConfig.from_dict({"model_type": "gpt2"})
    with pytest.raises(UnsupportedModelError, match="text_config"):
        ModelConfig.from_dict({"model_type": "qwen3_5"})
    # a field left out takes transformers' default (test_config_variants.py); one of the wrong JSON type is refused
    with pytest.raises(UnsupportedModelError, match="bad or missing field.*'wide'"):
        ModelConfig.from_dict(_text_config(hidden_size="wide"))
    with pytest.raises(UnsupportedModelError, match="layer_types"):
        ModelConfig.from_dict(_text_config(layer_types=["linear_attention"]))
