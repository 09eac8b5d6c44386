"""A parameter the tool declares without a type ({"description": ...}, {"title": ...}, {}) is the text the model wrote,
as vLLM's qwen3_coder (_convert_param_value: no "type" reads as "string") and Ollama's parser (parseTypedToolValue:
no types, the raw string) return it. It was read as JSON: "1e3" came back as 1000.0, '["a", "b"]' as a list, "true"
as true; streamed or not, on every route. A forced call's grammar writes such a value as text too, so it reads back."""
import json

import pytest

from gateway.tool_grammar import string_terminal
from gateway.tools import parse_tool_calls
from tests.unit.tool_deltas import route_call_arguments

PARAMS = {"type": "object", "properties": {"id": {"description": "the id"}, "tags": {"title": "Tags"}, "flag": {},
                                           "n": {"type": "integer", "description": "typed"}}}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": PARAMS}}]
REPLY = ("<tool_call>\n<function=f>\n<parameter=id>\n1e3\n</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n"
         "</parameter>\n<parameter=flag>\ntrue\n</parameter>\n<parameter=n>\n7\n</parameter>\n</function>\n</tool_call>")
EXPECTED = {"id": "1e3", "tags": '["a", "b"]', "flag": "true", "n": 7}


def test_an_untyped_value_is_its_text():
    assert [json.loads(call["function"]["arguments"]) for call in parse_tool_calls(REPLY, TOOLS)] == [EXPECTED]


@pytest.mark.parametrize("schema", [{"description": "the id"}, {}, {"title": "T", "default": "x"}],
                         ids=["description", "empty", "title-default"])
def test_a_forced_call_writes_an_untyped_value_as_text(schema):
    assert string_terminal(schema, 100) == string_terminal({"type": "string"}, 100) is not None


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_every_route_gives_the_text(stack, stream):
    client, fake = stack
    fake.script.reply = REPLY
    arguments, ollama = await route_call_arguments(client, TOOLS, stream)
    assert json.loads(arguments) == EXPECTED and ollama == [EXPECTED]
