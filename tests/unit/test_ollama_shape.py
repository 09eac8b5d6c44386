"""Unit: engine output -> Ollama objects (durations, chunks, final line, tool calls, tags/ps/show), golden JSON."""
import asyncio
import dataclasses
import re
from datetime import datetime, timezone

import orjson
import pytest

from gateway.engine import Delta, GenRequest, TokenLogprob, Usage
from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.model import ModelCard
from gateway.ollama_names import tag_name
from gateway.ollama_request import OllamaPlan
from gateway.ollama_models import arch_family, created_at, parameter_size, ps_entry, tags_entry
from gateway.ollama_shape import (OllamaOutput, Piece, chunk, done_reason, durations_ns, final, final_metrics,
                                  load_response, ndjson_line, ollama_tool_calls)
from gateway.ollama_show import show_body

STAMP = "2026-01-02T03:04:05.000006Z"
TOOLS = [{"type": "function", "function": {"name": "get_weather"}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"


@pytest.fixture(scope="module")
def card() -> ModelCard:
    info = asyncio.run(FakeServing(build_tokenizer(), max_context_len=2048).Info(None, None))
    return ModelCard.from_info(info)


def plan(**kwargs) -> OllamaPlan:
    return OllamaPlan(model="default", gen=GenRequest(req_id="r", prompt_ids=[1, 2, 3], max_tokens=8), **kwargs)


def test_durations_are_positive_ns_and_add_up():
    d = durations_ns(received=10.0, started=10.001, first_token=10.5, finished=11.0, done=11.002)
    assert d == {"total_duration": 1_002_000_000, "load_duration": 1_000_000, "prompt_eval_duration": 499_000_000,
                 "eval_duration": 500_000_000}
    assert all(isinstance(v, int) and v > 0 for v in d.values())


def test_time_queued_for_a_seat_is_not_prompt_eval_time():
    """As in Ollama, waiting for a parallel slot counts in total_duration only, not in prompt_eval_duration."""
    d = durations_ns(received=10.0, started=10.001, first_token=16.2, finished=16.3, done=16.302, queued=6.0)
    assert d == {"total_duration": 6_302_000_000, "load_duration": 1_000_000, "prompt_eval_duration": 199_000_000,
                 "eval_duration": 100_000_000}
    odd = durations_ns(received=10.0, started=10.0, first_token=10.5, finished=11.0, done=11.0, queued=9.0)
    assert odd["prompt_eval_duration"] == 1 and odd["total_duration"] >= sum(
        odd[k] for k in ("load_duration", "prompt_eval_duration", "eval_duration"))


@pytest.mark.parametrize("first_token", [None, 9.0, 20.0], ids=["no token", "before start", "after finish"])
def test_durations_stay_positive_and_consistent_at_the_edges(first_token):
    d = durations_ns(received=10.0, started=10.0, first_token=first_token, finished=10.0, done=10.0)
    assert all(isinstance(v, int) and v >= 1 for v in d.values())
    assert d["load_duration"] + d["prompt_eval_duration"] + d["eval_duration"] <= d["total_duration"]


def test_final_metrics_order_and_values():
    durations = durations_ns(0.0, 0.1, 0.2, 0.4, 0.5)
    metrics = final_metrics(Usage(prompt_tokens=7, completion_tokens=3), durations)
    assert list(metrics) == ["total_duration", "load_duration", "prompt_eval_count", "prompt_eval_cached_count",
                             "prompt_eval_duration", "eval_count", "eval_duration"]
    assert (metrics["prompt_eval_count"], metrics["prompt_eval_cached_count"], metrics["eval_count"]) == (7, 0, 3)


@pytest.mark.parametrize("finish,expected", [("stop", "stop"), ("length", "length"), ("tool_calls", "stop"),
                                             (None, "stop")])
def test_done_reason(finish, expected):
    assert done_reason(finish) == expected


def test_tool_calls_become_whole_objects_with_object_arguments():
    calls = [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
             {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "not json"}}]
    assert ollama_tool_calls(calls) == [
        {"id": "call_1", "function": {"index": 0, "name": "f", "arguments": {"a": 1}}},
        {"id": "call_2", "function": {"index": 1, "name": "g", "arguments": {}}}]


def test_chat_chunk_and_final_golden(card):
    p = plan()
    out = OllamaOutput(p, card)
    piece = out.push(Delta(0, content="Hel", reasoning="hmm"))
    assert chunk(p, True, piece, STAMP) == {"model": "default", "created_at": STAMP, "message": {
        "role": "assistant", "content": "Hel", "thinking": "hmm"}, "done": False}
    out.push(Delta(0, content="lo", finish_reason="length"))
    metrics = final_metrics(Usage(3, 2), durations_ns(0.0, 0.1, 0.2, 0.4, 0.5))
    body = final(p, True, Piece(), out, metrics, STAMP)
    assert orjson.dumps(body) == (
        b'{"model":"default","created_at":"2026-01-02T03:04:05.000006Z","message":{"role":"assistant","content":""},'
        b'"done":true,"done_reason":"length","total_duration":500000000,"load_duration":100000000,'
        b'"prompt_eval_count":3,"prompt_eval_cached_count":0,"prompt_eval_duration":100000000,"eval_count":2,"eval_duration":200000000}')


def test_generate_final_carries_context_of_prompt_and_sampled_ids(card):
    p = plan(return_context=True)
    out = OllamaOutput(p, card)
    piece = out.push(Delta(0, content="Hi", logprobs=[TokenLogprob(40, -0.1), TokenLogprob(41, -0.2)]))
    assert chunk(p, False, piece, STAMP) == {"model": "default", "created_at": STAMP, "response": "Hi", "done": False}
    out.push(Delta(0, finish_reason="stop"))
    body = final(p, False, Piece(content="Hi"), out, {"total_duration": 1}, STAMP)
    assert body == {"model": "default", "created_at": STAMP, "response": "Hi", "done": True, "done_reason": "stop",
                    "context": [1, 2, 3, 40, 41], "total_duration": 1}


def test_logprobs_only_when_asked(card):
    p = plan(want_logprobs=True)
    piece = OllamaOutput(p, card).push(Delta(0, content="x", logprobs=[TokenLogprob(70, -0.5, [(71, -1.0)])]))
    entry = piece.logprobs[0]
    assert entry["logprob"] == -0.5 and entry["token"] == card.token_text(70)
    assert entry["bytes"] == list(card.token_bytes(70))
    assert entry["top_logprobs"] == [{"token": card.token_text(71), "logprob": -1.0,
                                      "bytes": list(card.token_bytes(71))}]
    assert chunk(p, True, piece, STAMP)["logprobs"] == [entry]


def test_tool_call_text_is_held_and_sent_whole(card):
    p = plan(tools=TOOLS)
    out = OllamaOutput(p, card)
    pieces = [out.push(Delta(0, content=CALL[:20])), out.push(Delta(0, content=CALL[20:])),
              out.push(Delta(0, finish_reason="stop"))]
    assert [piece.content for piece in pieces] == ["", "", ""]
    calls = pieces[-1].tool_calls
    assert [c["function"] for c in calls] == [{"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}}]
    assert chunk(p, True, pieces[-1], STAMP)["message"]["tool_calls"] == calls


def test_load_responses():
    assert load_response(OllamaPlan(model="m"), chat=True)["done_reason"] == "load"
    body = load_response(OllamaPlan(model="m", unload=True), chat=False)
    assert body["response"] == "" and body["done"] is True and body["done_reason"] == "unload"


def test_ndjson_line_is_one_line_of_json():
    line = ndjson_line({"response": "a\nb 🎉", "done": False})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == {"response": "a\nb 🎉", "done": False}


def test_names_and_times():
    assert tag_name("tiny") == "tiny:latest" and tag_name("org/m:q4") == "org/m:q4"
    assert tag_name("host:5000/m") == "host:5000/m:latest"
    assert arch_family("Qwen3_5ForConditionalGeneration") == "qwen3_5"
    assert arch_family("Qwen3NextForCausalLM") == "qwen3_next"
    assert arch_family("qwen3_5") == "qwen3_5" and arch_family("") == "unknown"
    assert created_at(datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc)) == STAMP


def test_times_are_written_as_go_writes_a_time():
    """Go's time.Time MarshalJSON (RFC 3339 with nanoseconds, trailing zeros cut, no fraction on a whole second), as
    Ollama's created_at reads "2025-07-07T20:22:19.19314Z" in docs/api.md; a time written now has the clock's
    nanoseconds, as Ollama's time.Now() on Linux ("2024-12-10T13:49:29.344085844Z"), not 6 digits padded with zeros."""
    assert created_at(datetime(2026, 1, 2, 3, 4, 5, 193140, tzinfo=timezone.utc)) == "2026-01-02T03:04:05.19314Z"
    assert created_at(datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)) == "2026-01-02T03:04:05Z"
    stamps = [created_at() for _ in range(200)]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,8}[1-9])?Z", stamp) for stamp in stamps), stamps
    assert any(len(stamp) > len("2026-01-02T03:04:05.123456Z") for stamp in stamps)


def test_tags_ps_show_entries(card):
    tags = tags_entry(card, "fake-model")
    assert list(tags) == ["name", "model", "modified_at", "size", "digest", "details", "capabilities"]
    assert tags["name"] == tags["model"] == "fake-model:latest" and len(tags["digest"]) == 64
    assert tags["details"] == {"parent_model": "", "format": "safetensors", "family": "qwen3_5",
                               "families": ["qwen3_5"], "parameter_size": "1K", "quantization_level": "BF16",
                               "context_length": 2048, "embedding_length": 64}
    assert tags["capabilities"] == ["completion", "tools", "thinking"]
    assert tags["size"] == 2000
    ps = ps_entry(card, "fake-model")
    assert ps["context_length"] == 2048 and ps["size_vram"] == ps["size"] and ps["expires_at"] > tags["modified_at"]
    show = show_body(card, "fake-model")
    assert show["model_info"]["qwen3_5.context_length"] == 2048
    assert show["capabilities"] == ["completion", "tools", "thinking"]
    assert show["parameters"] == "num_ctx                        2048\ntemperature                    0.7"
    assert show["template"] == card.chat_template_source
    assert show["modelfile"].endswith("FROM fake-model:latest\nPARAMETER num_ctx 2048\nPARAMETER temperature 0.7\n")


# Ollama's own cases (format/format_test.go TestHumanNumber) and the tiny checkpoint's count.
HUMAN_NUMBERS = [(0, "0"), (999, "999"), (1000, "1K"), (1001, "1K"), (600496, "600K"), (1000000, "1M"),
                 (125000000, "125M"), (500500000, "500.50M"), (500550000, "500.55M"), (1000000000, "1B"),
                 (2800000000, "2.8B"), (2850000000, "2.9B"), (27000000000, "27B"), (1000000000000, "1000B")]


@pytest.mark.parametrize("count,expected", HUMAN_NUMBERS, ids=[text for _, text in HUMAN_NUMBERS])
def test_parameter_size_is_written_as_ollamas_human_number(card, count, expected):
    """details.parameter_size (/api/tags, /api/ps, /api/show) as Ollama's format.HumanNumber writes it: it was
    "1.0K", "600.5K", "27.0B", "1.5M" where Ollama writes "1K", "600K", "27B", "1.50M"."""
    assert parameter_size(count) == expected
    details = tags_entry(dataclasses.replace(card, num_parameters=count), "fake-model")["details"]
    assert details["parameter_size"] == expected


def test_show_model_info_gives_the_architectures_sizes_under_ollamas_names(card):
    """As Ollama's /api/show describes a safetensors model (x/server/show.go buildModelInfo: config.json's sizes
    under their GGUF names); it gave only the architecture, the context length and the parameter count, so clients
    reading <arch>.embedding_length or <arch>.block_count found nothing."""
    assert show_body(card, "fake-model")["model_info"] == {
        "general.architecture": "qwen3_5", "general.parameter_count": 1000, "general.basename": "fake-model",
        "qwen3_5.context_length": 2048, "qwen3_5.embedding_length": 64, "qwen3_5.block_count": 8,
        "qwen3_5.attention.head_count": 4, "qwen3_5.attention.head_count_kv": 2,
        "qwen3_5.feed_forward_length": 128, "qwen3_5.vocab_size": 1024, "tokenizer.ggml.model": "gpt2"}


@pytest.mark.parametrize("config,length", [
    ({"hidden_size": 5120}, 5120), ({"hidden_size": 4096, "text_config": {"hidden_size": 5120}}, 5120),
    ({"text_config": {"vocab_size": 10}, "hidden_size": 2048}, 2048), ({}, None), ({"hidden_size": "big"}, None),
], ids=["top level", "text_config first", "text_config without it", "none", "not a number"])
def test_tags_give_the_embedding_length_as_ollama_lists_it(card, config, length):
    """Ollama 0.32's model list (server/model_list_cache.go) gives details.embedding_length, the hidden size, for
    every local model, and leaves it out when it has none (omitempty); the /api/tags details lacked it."""
    details = tags_entry(dataclasses.replace(card, config=config), "fake-model")["details"]
    assert details.get("embedding_length") == length
    assert list(details)[-1] == ("embedding_length" if length else "context_length")

