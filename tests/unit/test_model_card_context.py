"""Unit tests (CPU): the context a checkpoint serves is the max_model_len vLLM derives from its config.json
(vllm/config/model.py _get_and_verify_max_len): max_position_embeddings, times the factor of a linear rope; a yarn
rope's original_max_position_embeddings times its factor (Qwen3.5 / Qwen3-Next model cards' 1M-token yarn setting)."""
import json
import os
import shutil

import pytest

from worker.model_card import load_model_card

TINY = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny")
MAX_POSITIONS = 8192


def _vllm_max_model_len(rope: dict) -> int:
    """vLLM's rule, on the rope_parameters as transformers standardises them (yarn's original defaults to
    max_position_embeddings)."""
    if rope["rope_type"] in ("su", "longrope", "llama3"):
        return MAX_POSITIONS
    derived = rope.get("original_max_position_embeddings", MAX_POSITIONS) if rope["rope_type"] == "yarn" \
        else MAX_POSITIONS
    return int(derived * (rope.get("factor") or 1.0))


@pytest.mark.parametrize("scaling", [
    {"rope_type": "default"},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": MAX_POSITIONS},
    {"rope_type": "yarn", "factor": 4.0},
    {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 2048},
    {"rope_type": "linear", "factor": 2.0},
], ids=["default", "yarn-4x", "yarn-no-original", "yarn-original-below", "linear-2x"])
def test_served_context_is_vllms_derived_max_model_len(scaling, tmp_path):
    folder = str(tmp_path / "ckpt")
    shutil.copytree(TINY, folder)
    path = os.path.join(folder, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    text = config["text_config"]
    assert text["max_position_embeddings"] == MAX_POSITIONS
    text["rope_parameters"] = dict(text["rope_parameters"], **scaling)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    assert load_model_card(folder)["max_context_len"] == _vllm_max_model_len(text["rope_parameters"])
