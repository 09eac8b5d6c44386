"""Answer text after a tool call's end where the whole reading wanted a closer or a call, on every chat route,
streamed or not. Between two calls, the second ending the output: each call is read at its own </tool_call> and the
text is answer text; the reading that ends the output came first, so call A's value ran through call B's markup
({"city": "A\\n</parameter>\\n</function>\\n</tool_call>\\nand ..."}): one garbled call and the second lost. Ollama's
parser ends a call at its first </tool_call> and returns the text between as content (model/parsers/qwen3coder.go);
Qwen3 models write "Now the second one:" between calls."""
import json

import orjson
import pytest

from tests.unit.tool_deltas import chunk_calls

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
USER = [{"role": "user", "content": "weather in Paris and Rome?"}]


def _call(city: str) -> str:
    return f"<tool_call>\n<function=get_weather>\n<parameter=city>\n{city}\n</parameter>\n</function>\n</tool_call>"


BETWEEN = {"word-line": ("\nand\n", "and"), "inline": ("\nThen ", "Then"),
           "sentence": ("\n\nNow the second one:\n\n", "Now the second one:"), "same-line": (" and ", "and")}


def _sse(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]


async def _v1(client, stream: bool) -> tuple:
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False, "stream": stream}
    raw = await (await client.post("/v1/chat/completions", json=body)).read()
    if not stream:
        message = orjson.loads(raw)["choices"][0]["message"]
        return message["content"], [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]]
    chunks = [c for c in _sse(raw) if c["choices"]]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    return content, [json.loads(c["function"]["arguments"]) for c in chunk_calls(chunks)]


async def _ollama(client, stream: bool) -> tuple:
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "think": False, "stream": stream}
    lines = (await (await client.post("/api/chat", json=body)).read()).splitlines()
    messages = [orjson.loads(line)["message"] for line in lines if line.strip()]
    return "".join(m["content"] for m in messages), [c["function"]["arguments"] for m in messages
                                                     for c in m.get("tool_calls") or []]


async def _anthropic(client, stream: bool) -> list:
    body = {"model": "fake-model", "max_tokens": 500, "messages": USER, "thinking": {"type": "disabled"},
            "stream": stream, "tools": [{"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}]}
    raw = await (await client.post("/v1/messages", json=body)).read()
    if not stream:
        return [b.get("text") or b.get("input") for b in orjson.loads(raw)["content"]]
    blocks: dict = {}
    for event in _sse(raw):
        if event["type"] == "content_block_start":
            blocks[event["index"]] = [event["content_block"]["type"], event["content_block"].get("text", "")]
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            blocks[event["index"]][1] += delta.get("text") or delta.get("partial_json") or ""
    return [json.loads(text) if kind == "tool_use" else text for kind, text in (blocks[i] for i in sorted(blocks))]


async def _responses(client, stream: bool) -> list:
    body = {"model": "fake-model", "input": USER[0]["content"], "reasoning": {"effort": "none"}, "stream": stream,
            "tools": [{"type": "function", "name": "get_weather", "parameters": TOOLS[0]["function"]["parameters"]}]}
    raw = await (await client.post("/v1/responses", json=body)).read()
    response = [e for e in _sse(raw) if e["type"] == "response.completed"][0]["response"] if stream \
        else orjson.loads(raw)
    return [json.loads(item["arguments"]) if item["type"] == "function_call" else item["content"][0]["text"]
            for item in response["output"]]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("between", BETWEEN, ids=BETWEEN.keys())
async def test_each_call_and_the_text_between(stack, between, stream):
    client, fake = stack
    written, text = BETWEEN[between]
    fake.script.reply = _call("Paris") + written + _call("Rome")
    calls = [{"city": "Paris"}, {"city": "Rome"}]
    assert await _v1(client, stream) == (text, calls)
    assert await _ollama(client, stream) == (text, calls)
    assert await _anthropic(client, stream) == [calls[0], text, calls[1]]
    assert await _responses(client, stream) == [calls[0], text, calls[1]]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_value_quoting_the_closing_tags_goes_on(stack, stream):
    """Text after quoted closing tags that no call follows is still the value's (the reading that ends the output)."""
    client, fake = stack
    value = "A\n</parameter>\n</function>\n</tool_call>\nmore"
    fake.script.reply = _call(value)
    assert await _v1(client, stream) == (None if not stream else "", [{"city": value}])


# A call whose </tool_call> the model left out, writing answer text after its </function> (or garbling the closer).
NO_CLOSE = {"sentence": ("\nDone.", "Done."), "paragraph": ("\n\nI asked for the weather.", "I asked for the weather."),
            "then-call": ("\nNext:\n" + _call("Rome"), "Next:")}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("after", NO_CLOSE, ids=NO_CLOSE.keys())
async def test_text_after_a_function_close_ends_the_call(stack, after, stream):
    """'</function>' then answer text: the call ends there, as vLLM's qwen3_coder ends the function at its structural
    </function> (_scan_to_structural_function_end). It was no call (the markup came back as content), and a stream
    sent the value as 'Paris\\n</parameter>'."""
    client, fake = stack
    written, text = NO_CLOSE[after]
    fake.script.reply = _call("Paris").removesuffix("\n</tool_call>") + written
    calls = [{"city": "Paris"}] + [{"city": "Rome"}] * ("Rome" in written)
    assert await _v1(client, stream) == (text, calls)
    assert await _ollama(client, stream) == (text, calls)
    assert await _anthropic(client, stream) == [calls[0], text] + calls[1:]
    assert await _responses(client, stream) == [calls[0], text] + calls[1:]


async def test_a_value_quoting_a_function_close_and_text_goes_on(stack):
    """Text after a quoted </function> that the value's own </parameter> follows is the value's."""
    client, fake = stack
    value = "A\n</parameter>\n</function>\nmore"
    fake.script.reply = _call(value)
    assert await _v1(client, False) == (None, [{"city": value}])
