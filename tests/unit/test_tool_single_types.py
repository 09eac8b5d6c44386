"""A tool-call value that is not of its parameter's one type is read as vLLM's qwen3_coder parser
(_convert_param_value) and Ollama's (parseTypedToolValue) both read it: a boolean written yes / no / 1 is false, and
an integer written 1.5 (or a number written as a word) is the text the model wrote. They came back as the string
"yes", the number 1 for a boolean and the float 1.5 for an integer: values of another type than the tool's schema
names, which typed clients (Codex's serde decoder, the OpenAI Agents SDK's pydantic models) refuse. On every route,
streamed or not."""
import json

import orjson
import pytest

from gateway.tools import parse_tool_calls
from tests.unit.tool_deltas import route_call_arguments

PARAMS = {"type": "object", "properties": {
    "force": {"type": "boolean"}, "quiet": {"type": "boolean"}, "all": {"type": "boolean"},
    "depth": {"type": "integer", "minimum": 0}, "ratio": {"type": "number"}, "count": {"type": "integer"},
    "maybe": {"type": ["boolean", "null"]}, "either": {"type": ["integer", "string"]}, "page": {"type": "integer"},
    "opt": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}, "nullable": {"type": ["integer", "null"]}}}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": PARAMS}}]
VALUES = {"force": "yes", "quiet": "No", "all": "1", "depth": "1.5", "ratio": "many", "count": "-3",
          "maybe": "yes", "either": "1.5", "page": "007", "opt": "007", "nullable": "-007"}
REPLY = "<tool_call>\n<function=f>\n" + "".join(
    f"<parameter={name}>\n{value}\n</parameter>\n" for name, value in VALUES.items()) + "</function>\n</tool_call>"
# A value the parameter's one type fits stays (count -3, which minimum refuses: a bound is no type); a parameter
# of several types keeps its reading, as both parsers keep it; a nullable integer (pydantic's Optional[int]) is an
# integer's, as vLLM reads an anyOf by its first non-null type and Ollama a type list integer first ("007" before).
EXPECTED = {"force": False, "quiet": False, "all": False, "depth": "1.5", "ratio": "many", "count": -3,
            "maybe": "yes", "either": "1.5", "page": 7, "opt": 7, "nullable": -7}


def test_the_reader_gives_each_parameters_type_or_the_text():
    assert [json.loads(call["function"]["arguments"]) for call in parse_tool_calls(REPLY, TOOLS)] == [EXPECTED]


@pytest.mark.parametrize("word, value", [("true", True), ("True", True), ("FALSE", False), ("null", None)])
def test_true_false_and_null_stay_themselves(word, value):
    text = f"<tool_call>\n<function=f>\n<parameter=force>\n{word}\n</parameter>\n</function>\n</tool_call>"
    assert json.loads(parse_tool_calls(text, TOOLS)[0]["function"]["arguments"]) == {"force": value}


def _frames(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_every_route_gives_the_typed_arguments(stack, stream):
    client, fake = stack
    fake.script.reply = REPLY
    arguments, ollama = await route_call_arguments(client, TOOLS, stream)
    assert json.loads(arguments) == EXPECTED and ollama == [EXPECTED]
    body = {"model": "default", "input": "hi", "reasoning": {"effort": "none"}, "stream": stream,
            "tools": [{"type": "function", "name": "f", "parameters": PARAMS}]}
    raw = await (await client.post("/v1/responses", json=body)).read()
    response = _frames(raw)[-1]["response"] if stream else orjson.loads(raw)
    assert [json.loads(i["arguments"]) for i in response["output"] if i["type"] == "function_call"] == [EXPECTED]
    body = {"model": "default", "max_tokens": 300, "messages": [{"role": "user", "content": "hi"}],
            "thinking": {"type": "disabled"},
            "tools": [{"name": "f", "input_schema": PARAMS}], "stream": stream}
    raw = await (await client.post("/v1/messages", json=body)).read()
    if stream:
        assert json.loads("".join(e["delta"]["partial_json"] for e in _frames(raw) if e["type"] == "content_block_delta"
                                  and e["delta"]["type"] == "input_json_delta")) == EXPECTED
    else:
        assert [b["input"] for b in orjson.loads(raw)["content"] if b["type"] == "tool_use"] == [EXPECTED]


@pytest.mark.parametrize("raw, integer, number", [
    ("007", 7, 7), ("-007", -7, -7), ("+5", 5, 5), ("0.50", "0.50", 0.5), ("1_000", 1000, 1000),
    ("0x10", "0x10", "0x10"), ("0b11", "0b11", "0b11"), ("0o7", "0o7", "0o7"), ("1e400", "1e400", "1e400")],
    ids=["leading-zeros", "signed-zeros", "plus", "fraction", "grouped", "hex", "binary", "octal", "overflow"])
def test_numbers_are_read_from_their_decimal_text(raw, integer, number):
    # 007 came back as the string "007" (no JSON number), and 0x10 as 16 (a Python literal); int() / float() in vLLM's
    # qwen3_coder and ParseInt / ParseFloat in Ollama's parser read 007 as 7 and leave 0x10 the text.
    text = (f"<tool_call>\n<function=f>\n<parameter=count>\n{raw}\n</parameter>\n<parameter=ratio>\n{raw}\n"
            "</parameter>\n</function>\n</tool_call>")
    assert json.loads(parse_tool_calls(text, TOOLS)[0]["function"]["arguments"]) == {"count": integer, "ratio": number}
