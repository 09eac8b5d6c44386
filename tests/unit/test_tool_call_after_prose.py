"""Prose that shows a bare <function=NAME> (no call: it does not read whole) before a real <tool_call> no longer hides
that call: the whole output came back as text with finish_reason "stop". vLLM's qwen3_coder parser reads the
<tool_call> blocks wherever they are and keeps the text before the first as content; so do /v1 (streamed or not),
/api/v0 and Ollama's /api/chat now, the prose staying text."""
import json

import pytest

from tests.unit.tool_deltas import join_calls

PROSE = "Use <function=get_weather> like this."
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>"
REPLY = PROSE + "\n" + CALL
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/api/v0/chat/completions"])
@pytest.mark.parametrize("stream", [False, True])
async def test_the_call_after_the_prose_is_a_call(stack, route, stream):
    client, _ = stack
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False, "stream": stream}
    response = await client.post(route, json=body)
    if stream:
        lines = (await response.read()).decode().split("\n")
        chunks = [c for c in (json.loads(line[6:]) for line in lines if line.startswith("data: {")) if c["choices"]]
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        calls = join_calls([call for c in chunks for call in c["choices"][0]["delta"].get("tool_calls", [])])
        finish = chunks[-1]["choices"][0]["finish_reason"]
    else:
        choice = (await response.json())["choices"][0]
        content, calls, finish = choice["message"]["content"], choice["message"]["tool_calls"], choice["finish_reason"]
    assert content == PROSE and finish == "tool_calls"
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Rome"})]


async def test_ollama_chat_reads_it_too(stack):
    client, _ = stack
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "think": False, "stream": False}
    message = (await (await client.post("/api/chat", json=body)).json())["message"]
    assert message["content"] == PROSE
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == [{"city": "Rome"}]


async def test_prose_alone_stays_text(stack):
    client, fake = stack
    fake.script.reply = PROSE + " Then <function=get_weather> again."
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False}
    choice = (await (await client.post("/v1/chat/completions", json=body)).json())["choices"][0]
    assert choice["message"]["content"] == fake.script.reply and "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"
