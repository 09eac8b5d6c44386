"""Streamed tool calls on /v1/chat/completions and /api/v0/chat/completions arrive as the model writes them, not all in
the final chunk: vLLM's tool parsers stream each call as they parse it (hermes / qwen3_coder
extract_tool_calls_streaming: a delta with the call's index, id, type and name, then its arguments), and Ollama's
stream here sends each call at the next one's start (ToolCallFilter.take_ready). Both calls came in one chunk just
before finish_reason "tool_calls". The calls, their order and arguments match the non-streamed answer (the arguments'
pieces: test_tool_call_arguments_stream)."""
import json

import pytest

from tests.unit.tool_deltas import chunk_calls, join_calls


def _call(city: str) -> str:
    return f"<tool_call>\n<function=get_weather>\n<parameter=city>\n{city}\n</parameter>\n</function>\n</tool_call>"


REPLY = _call("Paris") + "\n" + _call("Rome")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
BODY = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
        "enable_thinking": False}


def _chunks(raw: bytes) -> list:
    return [json.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/api/v0/chat/completions"])
async def test_each_call_streams_when_it_is_whole(stack, route):
    client, _ = stack
    options = {"include_usage": True, "continuous_usage_stats": True}
    response = await client.post(route, json={**BODY, "stream": True, "stream_options": options})
    chunks = [c for c in _chunks(await response.read()) if c["choices"]]
    carrying = [c for c in chunks if c["choices"][0]["delta"].get("tool_calls")]
    # One entry a chunk: each call's id, type and name first, then its arguments in pieces (tool_stream).
    entries = [c["choices"][0]["delta"]["tool_calls"] for c in carrying]
    assert all(len(entry) == 1 for entry in entries)
    indices = [entry[0]["index"] for entry in entries]
    assert indices == sorted(indices) and set(indices) == {0, 1} and indices.count(0) > 2
    first, second = join_calls([entry[0] for entry in entries])
    assert [json.loads(call["function"]["arguments"]) for call in (first, second)] == [{"city": "Paris"},
                                                                                       {"city": "Rome"}]
    assert first["id"] != second["id"] and first["type"] == second["type"] == "function"
    # The first call went out while the second was still being generated, and before the finish chunk.
    last_of_first = max(i for i, index in enumerate(indices) if index == 0)
    assert carrying[last_of_first]["usage"]["completion_tokens"] < carrying[-1]["usage"]["completion_tokens"]
    assert all(c["choices"][0]["finish_reason"] is None for c in carrying)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    whole = (await (await client.post(route, json=BODY)).json())["choices"][0]
    assert whole["finish_reason"] == "tool_calls" and whole["message"]["content"] is None
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in whole["message"]["tool_calls"]] == [
        (c["function"]["name"], c["function"]["arguments"]) for c in (first, second)]


@pytest.mark.parametrize("stream", [True, False])
async def test_parallel_tool_calls_false_keeps_the_first_call_only(stack, stream):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={**BODY, "stream": stream, "parallel_tool_calls": False})
    if stream:
        chunks = _chunks(await response.read())
        calls = chunk_calls(chunks)
        finish = chunks[-1]["choices"][0]["finish_reason"]
    else:
        choice = (await response.json())["choices"][0]
        calls, finish = choice["message"]["tool_calls"], choice["finish_reason"]
    assert [(c.get("index", 0), json.loads(c["function"]["arguments"])) for c in calls] == [(0, {"city": "Paris"})]
    assert finish == "tool_calls"


@pytest.mark.parametrize("stream", [True, False])
async def test_a_call_cut_by_max_tokens_after_a_whole_one_stays_text(stack, stream):
    """The first call is whole (and streamed already); max_tokens cuts the second: it stays text, as a cut call
    always does here, and finish_reason stays "length" so that the client knows the output was cut."""
    client, fake = stack
    response = await client.post("/v1/chat/completions", json={**BODY, "stream": stream, "max_tokens": 60})
    if stream:
        chunks = [c for c in _chunks(await response.read()) if c["choices"]]
        calls = chunk_calls(chunks)
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        finish = chunks[-1]["choices"][0]["finish_reason"]
    else:
        choice = (await response.json())["choices"][0]
        calls, content, finish = choice["message"]["tool_calls"], choice["message"]["content"], choice["finish_reason"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Paris"}]
    assert content == "<tool_call>\n<function=get_weather>\n" and finish == "length"
