"""Unit tests (CPU): the ids a generation stops at include the tokenizer's eos_token, as vLLM stops at it (the
request's eos_token_id is tokenizer.eos_token_id; SamplingParams.update_from_generation_config adds
generation_config's eos_token_id list, from config.json when generation_config.json is absent)."""
import json
import os
import shutil

import pytest

from worker.model_card import load_model_card

transformers = pytest.importorskip("transformers")
TINY = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny")


def _folder(tmp_path, config_eos: int, keep_generation_config: bool) -> str:
    folder = str(tmp_path / "ckpt")
    shutil.copytree(TINY, folder)
    if not keep_generation_config:
        os.remove(os.path.join(folder, "generation_config.json"))
    path = os.path.join(folder, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    for block in (config, config.get("text_config") or {}):
        block["eos_token_id"] = config_eos
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return folder


def test_a_checkpoint_whose_configs_name_another_eos_still_stops_at_the_tokenizers(tmp_path):
    """A fine-tune without generation_config.json whose config.json names <|endoftext|> while its tokenizer's
    eos_token is <|im_end|> (the chat turn's end): before, only <|endoftext|> stopped it, and a chat answer ran on
    past <|im_end|>."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(TINY)
    endoftext = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    folder = _folder(tmp_path, endoftext, keep_generation_config=False)
    tokenizer_eos = transformers.AutoTokenizer.from_pretrained(folder).eos_token_id
    assert tokenizer_eos != endoftext
    assert sorted(load_model_card(folder)["eos_token_ids"]) == sorted({endoftext, tokenizer_eos})


def test_generation_config_eos_list_is_kept(tmp_path):
    folder = _folder(tmp_path, 5, keep_generation_config=True)
    with open(os.path.join(folder, "generation_config.json"), encoding="utf-8") as f:
        listed = json.load(f)["eos_token_id"]
    tokenizer_eos = transformers.AutoTokenizer.from_pretrained(folder).eos_token_id
    assert set(load_model_card(folder)["eos_token_ids"]) == {5, *listed, tokenizer_eos}
