"""Unit: LM Studio /api/v0 extras (model object, stats, stop_reason vocabulary, model_info, runtime), no sockets."""
import asyncio
import dataclasses

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.lmstudio import lmstudio_body
from gateway.lmstudio_shape import model_info, model_object, publisher, runtime, stats, stop_reason
from gateway.model import ModelCard


@pytest.fixture(scope="module")
def card() -> ModelCard:
    info = asyncio.run(FakeServing(build_tokenizer(), max_context_len=2048).Info(None, None))
    return ModelCard.from_info(info)


def test_model_object_golden(card):
    """capabilities ["tool_use"] as LM Studio lists a tool-trained model (the template renders tools); clients such as
    llm-lmstudio offer tools only then, and it was missing."""
    assert model_object(card, "served") == {
        "id": "served", "object": "model", "type": "llm", "publisher": "sparkinfer", "arch": "qwen3_5",
        "compatibility_type": "mlx", "quantization": "bf16", "state": "loaded",
        "max_context_length": 2048, "loaded_context_length": 2048, "capabilities": ["tool_use"]}


def test_no_tool_use_capability_without_a_tools_template(card):
    plain = dataclasses.replace(card, chat_template_source="{{ messages[0].content }}")
    assert "capabilities" not in model_object(plain, "served")


def test_publisher_is_the_org_of_a_hub_id(card):
    assert publisher(card) == "sparkinfer"
    assert publisher(dataclasses.replace(card, model_id="Qwen/Qwen3.5-27B")) == "Qwen"
    assert publisher(card, "Qwen/Qwen3.8-27B-NVFP4") == "Qwen"
    assert publisher(dataclasses.replace(card, model_id="Qwen/Qwen3.5-27B"), "alias") == "Qwen"


def test_model_info_and_runtime(card):
    assert model_info(card) == {"arch": "qwen3_5", "quant": "bf16", "format": "safetensors", "context_length": 2048}
    rt = runtime("1.2.3")
    assert rt["version"] == "1.2.3" and rt["supported_formats"] == ["safetensors"]
    assert rt["name"].startswith("sparkinfer-")


@pytest.mark.parametrize("finish,matched,num_tokens,expected", [
    ("stop", None, 10, "eosFound"),
    ("stop", "###", 10, "stopStringFound"),
    ("length", None, 10, "maxPredictedTokensReached"),
    ("length", None, 2048, "contextLengthReached"),
    ("tool_calls", None, 10, "toolCalls"),
    (None, None, 10, "failed"),
])
def test_stop_reason_vocabulary(finish, matched, num_tokens, expected):
    assert stop_reason(finish, matched, num_tokens, 2048) == expected


def test_stats_are_seconds_and_consistent_with_token_counts():
    body = stats(num_generated=50, received=100.0, first_token=100.25, finished=102.25, reason="eosFound")
    assert body == {"tokens_per_second": 25.0, "time_to_first_token": 0.25, "generation_time": 2.0,
                    "stop_reason": "eosFound"}


def test_stats_without_tokens():
    body = stats(num_generated=0, received=1.0, first_token=None, finished=1.5, reason="failed")
    assert body == {"tokens_per_second": 0.0, "time_to_first_token": 0.5, "generation_time": 0.0,
                    "stop_reason": "failed"}


def test_max_tokens_minus_one_means_no_limit():
    assert lmstudio_body({"max_tokens": -1, "prompt": "x"}) == {"prompt": "x", "max_tokens": None}
    assert lmstudio_body({"max_tokens": 5}) == {"max_tokens": 5}
    assert lmstudio_body([1]) == [1]
