"""Unit tests: a thinking model's calls written at the end of its thinking, which </think> then closes with nothing
after it, are the answer's calls, on every chat surface, streamed or not (vllm#39056: Qwen3.5 writes its XML call
inside <think>; vLLM's qwen3 parser left it in the reasoning, the answer came back empty, no tool_calls, finish
"stop", and the agent loop ended; Ollama's Qwen3.5 parser, where a <tool_call> ends the thinking, returns the call).
Calls the thinking goes on from, or that answer text follows, stay reasoning (test_reasoning_tool_calls.py)."""
import json

import pytest

from gateway.reasoning import split_whole
from tests.unit.tool_deltas import chunk_calls
from tests.unit.tool_routes import sse_events

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
THOUGHT = "The user wants the weather. I'll call the tool."
REPLY = f"{THOUGHT}\n\n{CALL}\n</think>\n\n"
USER = [{"role": "user", "content": "weather in Paris?"}]


@pytest.mark.parametrize("size", [1, 4, 1000], ids=["per-char", "4", "whole"])
def test_splitter_hands_the_closed_calls_to_the_answer(size):
    two = f"{THOUGHT}\n{CALL}\n{CALL}\n</think>\n\n \n"
    for text, calls in ((REPLY, f"{CALL}\n"), (two, f"{CALL}\n{CALL}\n")):
        pieces = [text[i:i + size] for i in range(0, len(text), size)]
        assert _split(pieces) == (f"{THOUGHT}\n\n" if text is REPLY else f"{THOUGHT}\n", calls)


@pytest.mark.parametrize("text", [
    f"{THOUGHT}\n{CALL}\n</think>\n\nDone.",           # answer text after </think>
    f"{THOUGHT}\n{CALL}\nThen again, no.</think>\n\n",  # the thinking went on after the call
    f"{THOUGHT} <tool_call> is the tag.</think>\n\n",  # a mention of the tag
    f"{THOUGHT}\n<tool_call>\n<function=get_weather>\n<tool_call>\n</tool_call>\n</think>\n\n",  # broken markup
], ids=["answer-after", "thought-after", "mention", "broken"])
@pytest.mark.parametrize("size", [1, 1000], ids=["per-char", "whole"])
def test_other_calls_in_the_thinking_stay_reasoning(text, size):
    reasoning, content = text.split("</think>")
    assert _split([text[i:i + size] for i in range(0, len(text), size)]) == (reasoning, content.lstrip("\n"))


def _split(pieces: list) -> tuple:
    from gateway.reasoning import ReasoningSplitter
    splitter = ReasoningSplitter(thinking_open=True)
    out = [splitter.push(piece) for piece in pieces] + [splitter.flush()]
    assert split_whole("".join(pieces), True) == ("".join(r for r, _ in out), "".join(c for _, c in out))
    return "".join(r for r, _ in out), "".join(c for _, c in out)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_v1_answer_is_the_call(stack, stream):
    client, fake = stack
    fake.script.reply = REPLY
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "stream": stream}
    raw = await (await client.post("/v1/chat/completions", json=body)).read()
    if stream:
        chunks = [c for c in sse_events(raw) if c["choices"]]
        reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks)
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        calls = [json.loads(c["function"]["arguments"]) for c in chunk_calls(chunks)]
        finish = chunks[-1]["choices"][0]["finish_reason"]
    else:
        choice = json.loads(raw)["choices"][0]
        reasoning, content, finish = choice["message"]["reasoning_content"], choice["message"]["content"] or "", \
            choice["finish_reason"]
        calls = [json.loads(c["function"]["arguments"]) for c in choice["message"].get("tool_calls") or []]
    assert (reasoning.strip(), content, calls, finish) == (THOUGHT, "", [{"city": "Paris"}], "tool_calls")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_ollama_anthropic_and_responses_answer_with_the_call(stack, stream):
    client, fake = stack
    fake.script.reply = REPLY
    lines = (await (await client.post("/api/chat", json={"model": "fake-model", "messages": USER, "tools": TOOLS,
                                                         "stream": stream})).read()).splitlines()
    messages = [json.loads(line)["message"] for line in lines if line.strip()]
    assert [c["function"]["arguments"] for m in messages for c in m.get("tool_calls") or []] == [{"city": "Paris"}]
    assert "".join(m.get("thinking") or "" for m in messages) == THOUGHT
    anthropic = {"model": "fake-model", "max_tokens": 1200, "messages": USER, "stream": stream,
                 "thinking": {"type": "enabled", "budget_tokens": 1024},
                 "tools": [{"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}]}
    raw = await (await client.post("/v1/messages", json=anthropic)).read()
    events = sse_events(raw) if stream else []
    kinds = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"] if stream else \
        [b["type"] for b in json.loads(raw)["content"]]
    assert kinds == ["thinking", "tool_use"]
    responses = {"model": "fake-model", "input": USER[0]["content"], "stream": stream,
                 "tools": [{"type": "function", "name": "get_weather", "parameters": TOOLS[0]["function"]["parameters"]}]}
    raw = await (await client.post("/v1/responses", json=responses)).read()
    response = [e for e in sse_events(raw) if e["type"] == "response.completed"][0]["response"] if stream \
        else json.loads(raw)
    assert [(o["type"], o.get("arguments")) for o in response["output"]] == [
        ("reasoning", None), ("function_call", '{"city":"Paris"}')]
