"""Answers that carry an integer beyond 64 bits (a tool argument the model wrote, request fields the Responses API
repeats) are written with every digit: orjson refused them, so they were a 500, or a stream cut by an HTTP 500 written
into its chunks."""
import json

import pytest

from gateway import json_out

BIG = 123456789012345678901234567890
REPLY = f"<tool_call>\n<function=f>\n<parameter=n>\n{BIG}\n</parameter>\n</function>\n</tool_call>"
PARAMS = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 2**70}}, "required": ["n"]}
USER = [{"role": "user", "content": "hi"}]


def _events(raw: bytes) -> list:
    return [json.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]


def test_dumps_keeps_every_digit():
    assert json_out.dumps({"n": BIG, "s": "é", "f": 1.5}) == '{"n":%d,"s":"é","f":1.5}'.encode() % BIG
    assert json_out.dumps({"n": 1, "s": "é"}) == '{"n":1,"s":"é"}'.encode()


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_tool_use_input_keeps_a_big_integer(stack, stream):
    client, _ = stack
    body = {"model": "fake-model", "max_tokens": 200, "messages": USER, "stream": stream,
            "thinking": {"type": "disabled"}, "tools": [{"name": "f", "input_schema": PARAMS}]}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    raw = await response.read()
    if stream:
        deltas = [e["delta"]["partial_json"] for e in _events(raw) if e["type"] == "content_block_delta"]
        assert json.loads("".join(deltas)) == {"n": BIG}
    else:
        reply = json.loads(raw)
        assert reply["stop_reason"] == "tool_use"
        assert [b["input"] for b in reply["content"] if b["type"] == "tool_use"] == [{"n": BIG}]


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_repeat_big_integers_of_the_request(stack, stream):
    client, _ = stack
    tools = [{"type": "function", "name": "f", "parameters": PARAMS}]
    body = {"model": "fake-model", "input": "hi", "tools": tools, "max_tool_calls": 2**70, "stream": stream,
            "reasoning": {"effort": "none"}}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    raw = await response.read()
    reply = _events(raw)[-1]["response"] if stream else json.loads(raw)
    assert reply["status"] == "completed" and reply["max_tool_calls"] == 2**70
    assert reply["tools"][0]["parameters"]["properties"]["n"]["maximum"] == 2**70
    calls = [item for item in reply["output"] if item["type"] == "function_call"]
    assert [json.loads(c["arguments"]) for c in calls] == [{"n": BIG}]
