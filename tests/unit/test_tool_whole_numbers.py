"""A whole number the model writes as a float (140.0, 6e4) for an integer or number parameter is the integer: Codex
decodes an integer argument with serde and refused 140.0 ("invalid type: floating point `140.0`, expected u64",
lidge-jun/opencodex#1611), and vLLM's qwen3_coder and Ollama's parser write whole numbers so (mlx-lm#1635 for
integers). Streamed or not, /v1 and Ollama."""
import json

import pytest

from gateway.tools import parse_tool_calls
from tests.unit.tool_deltas import route_call_arguments

PARAMS = {"type": "object", "properties": {
    "limit": {"type": "integer"}, "ms": {"type": ["integer", "null"]}, "ratio": {"type": "number"},
    "half": {"type": "number"}, "odd": {"type": "integer"}, "text": {"type": "string"}, "big": {"type": "integer"}}}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": PARAMS}}]
VALUES = {"limit": "140.0", "ms": "6e4", "ratio": "3.0", "half": "0.5", "odd": "1.5", "text": "2.0", "big": "1e300"}
REPLY = "<tool_call>\n<function=f>\n" + "".join(
    f"<parameter={name}>\n{value}\n</parameter>\n" for name, value in VALUES.items()) + "</function>\n</tool_call>"
# 1.5 and 1e300 are no integer: the text, as vLLM's and Ollama's parsers give it (tests/unit/test_tool_single_types.py).
EXPECTED = '{"limit":140,"ms":60000,"ratio":3,"half":0.5,"odd":"1.5","text":"2.0","big":"1e300"}'


def test_whole_numbers_are_integers():
    assert [call["function"]["arguments"] for call in parse_tool_calls(REPLY, TOOLS)] == [EXPECTED]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_every_route_writes_the_integer(stack, stream):
    client, fake = stack
    fake.script.reply = REPLY
    assert await route_call_arguments(client, TOOLS, stream) == (EXPECTED, [json.loads(EXPECTED)])


# The type through a union or a $ref (pydantic's Optional[int] is anyOf integer / null; a model field is a $ref), as
# vLLM's qwen3_coder reads an anyOf by its first non-null type: 140.0 came back as 140.0 there.
UNION_PARAMS = {"type": "object", "$defs": {"Count": {"type": "integer"}}, "definitions": {"Ms": {"type": "number"}},
                "properties": {
                    "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
                    "count": {"$ref": "#/$defs/Count"},
                    "ms": {"oneOf": [{"$ref": "#/definitions/Ms"}, {"type": "string"}]},
                    "ratio": {"allOf": [{"type": "number"}], "description": "r"},
                    "half": {"anyOf": [{"type": "number"}, {"type": "null"}]}}}
UNION_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": UNION_PARAMS}}]
UNION_VALUES = {"limit": "140.0", "count": "5.0", "ms": "6e4", "ratio": "3.0", "half": "0.5"}
UNION_REPLY = "<tool_call>\n<function=f>\n" + "".join(
    f"<parameter={name}>\n{value}\n</parameter>\n" for name, value in UNION_VALUES.items()
) + "</function>\n</tool_call>"
UNION_EXPECTED = '{"limit":140,"count":5,"ms":60000,"ratio":3,"half":0.5}'


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_union_or_ref_typed_number_is_the_integer_on_every_route(stack, stream):
    client, fake = stack
    fake.script.reply = UNION_REPLY
    assert await route_call_arguments(client, UNION_TOOLS, stream) == (UNION_EXPECTED, [json.loads(UNION_EXPECTED)])
    anthropic = {"model": "default", "max_tokens": 500, "messages": [{"role": "user", "content": "hi"}],
                 "stream": False, "tools": [{"name": "f", "input_schema": UNION_PARAMS}],
                 "thinking": {"type": "disabled"}}
    message = await (await client.post("/v1/messages", json=anthropic)).json()
    assert [block["input"] for block in message["content"] if block["type"] == "tool_use"] == \
        [json.loads(UNION_EXPECTED)]
