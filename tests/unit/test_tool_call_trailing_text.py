"""Text the model writes after (or between) its tool calls is answer text on every chat route, streamed or not: it
was dropped, the content ending at the first <tool_call>. Ollama's qwen3coder parser returns it as content (each piece
without the whitespace beside a call, joined as they come), vLLM's qwen3_coder streams it (sglang#40739, vllm#56263:
the parse that drops it is the bug)."""
import json

import orjson
import pytest

from tests.unit.tool_deltas import chunk_calls
from tests.unit.tool_routes import sse_events


def _call(x: int) -> str:
    return f"<tool_call>\n<function=f>\n<parameter=x>\n{x}\n</parameter>\n</function>\n</tool_call>"


REPLY = f"Checking.\n\n{_call(5)}\nThen {_call(6)}\nDone, wait for it.\n"
TEXT = "Checking.ThenDone, wait for it."
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "integer"}}}}}]
USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/api/v0/chat/completions"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_openai_routes_keep_the_text_after_the_calls(stack, route, stream):
    client, _ = stack
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False, "stream": stream}
    response = await client.post(route, json=body)
    if stream:
        chunks = [c for c in sse_events(await response.read()) if c["choices"]]
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        calls = chunk_calls(chunks)
        finish = chunks[-1]["choices"][0]["finish_reason"]
    else:
        choice = (await response.json())["choices"][0]
        content, calls, finish = choice["message"]["content"], choice["message"]["tool_calls"], choice["finish_reason"]
    assert content == TEXT and finish == "tool_calls"
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"x": 5}, {"x": 6}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_ollama_chat_keeps_the_text_after_the_calls(stack, stream):
    client, _ = stack
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "think": False, "stream": stream}
    objects = [orjson.loads(line) for line in (await (await client.post("/api/chat", json=body)).read()).splitlines()]
    messages = [o["message"] for o in objects]
    assert "".join(m["content"] for m in messages) == TEXT
    assert [c["function"]["arguments"] for m in messages for c in m.get("tool_calls", [])] == [{"x": 5}, {"x": 6}]


async def test_anthropic_and_responses_keep_it_in_their_text(stack):
    """Each piece where the model wrote it, between and after the calls (tests/unit/test_output_order.py)."""
    client, _ = stack
    anthropic = await (await client.post("/v1/messages", json={
        "model": "fake-model", "max_tokens": 500, "messages": USER, "thinking": {"type": "disabled"},
        "tools": [{"name": "f", "input_schema": TOOLS[0]["function"]["parameters"]}]})).json()
    assert [(b["type"], b.get("text") or b.get("input")) for b in anthropic["content"]] == [
        ("text", "Checking."), ("tool_use", {"x": 5}), ("text", "Then"), ("tool_use", {"x": 6}),
        ("text", "Done, wait for it.")]
    responses = await (await client.post("/v1/responses", json={
        "model": "fake-model", "input": "hi", "reasoning": {"effort": "none"},
        "tools": [{"type": "function", "name": "f", "parameters": TOOLS[0]["function"]["parameters"]}]})).json()
    assert [item.get("arguments") or item["content"][0]["text"] for item in responses["output"]] == [
        "Checking.", '{"x":5}', "Then", '{"x":6}', "Done, wait for it."]


async def test_a_call_alone_still_has_no_content(stack):
    """Only whitespace after the call: no text, as before (content null on /v1)."""
    client, fake = stack
    fake.script.reply = _call(5) + "\n"
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False}
    choice = (await (await client.post("/v1/chat/completions", json=body)).json())["choices"][0]
    assert choice["message"]["content"] is None and choice["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("tail", ["\n</tool_call>", "\n</function>\n</tool_call>\n"], ids=["close", "both"])
async def test_a_closing_tag_repeated_after_the_call_is_no_text(stack, tail):
    """A model that closes its call twice: the extra closers are markup, not content (on /v1 and /api/chat)."""
    client, fake = stack
    fake.script.reply = _call(5) + tail
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False, "think": False}
    choice = (await (await client.post("/v1/chat/completions", json=body)).json())["choices"][0]
    assert choice["message"]["content"] is None and choice["finish_reason"] == "tool_calls"
    message = (await (await client.post("/api/chat", json={**body, "stream": False})).json())["message"]
    assert message["content"] == "" and [c["function"]["arguments"] for c in message["tool_calls"]] == [{"x": 5}]
