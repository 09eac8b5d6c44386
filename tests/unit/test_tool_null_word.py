"""Unit tests: a tool-call parameter the model writes as the word null (any case) is null whatever its type (a plain
string, no type, not declared, an integer), streamed or not, on /v1 and Ollama's /api/chat, as vLLM's qwen3_coder
parser reads it (_convert_param_value: "Handle null value for any type", before the parameter's schema is looked up)
and Ollama's (model/parsers/qwen3coder.go parseTypedToolValue: "this takes precedence over any type"). A string
parameter's null came back as the four-character string "null", which a tool then took as a value (a path, a
query). A forced call's string value is never the word, so it still reads back as its schema's string."""
import json

import pytest

from gateway.tool_grammar import tool_call_grammar
from tests.unit.test_grammar_tools import accepts, card  # noqa: F401  (card is a fixture)
from tests.unit.tool_deltas import chunk_calls
from tests.unit.tool_routes import sse_events

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "note": {"description": "no type"},
                                           "limit": {"type": "integer"}}}
TOOLS = [{"type": "function", "function": {"name": "read", "parameters": SCHEMA}}]
USER = [{"role": "user", "content": "read it"}]


def _call(**params) -> str:
    body = "".join(f"<parameter={name}>\n{value}\n</parameter>\n" for name, value in params.items())
    return f"<tool_call>\n<function=read>\n{body}</function>\n</tool_call>"


async def _v1(client, stream: bool) -> list:
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False, "stream": stream}
    raw = await (await client.post("/v1/chat/completions", json=body)).read()
    if stream:
        calls = chunk_calls([c for c in sse_events(raw) if c["choices"]])
    else:
        calls = json.loads(raw)["choices"][0]["message"]["tool_calls"]
    return [json.loads(c["function"]["arguments"]) for c in calls]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_null_word_is_null_for_every_parameter(stack, stream):
    client, fake = stack
    fake.script.reply = _call(path="null", note="NULL", limit="Null", extra="null")
    assert await _v1(client, stream) == [{"path": None, "note": None, "limit": None, "extra": None}]
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "think": False, "stream": stream}
    lines = (await (await client.post("/api/chat", json=body)).read()).splitlines()
    calls = [c["function"]["arguments"] for line in lines if line.strip()
             for c in json.loads(line)["message"].get("tool_calls") or []]
    assert calls == [{"path": None, "note": None, "limit": None, "extra": None}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_text_that_only_starts_like_null_stays_text(stack, stream):
    client, fake = stack
    fake.script.reply = _call(path="nul", note="nullable", extra=" null", limit="3")
    assert await _v1(client, stream) == [{"path": "nul", "note": "nullable", "extra": " null", "limit": 3}]


def test_a_forced_string_is_never_the_word(card):  # noqa: F811
    grammar = tool_call_grammar(TOOLS, "read", False, card)
    assert accepts(card, grammar, _call(path="nulls", limit="3"))
    assert not accepts(card, grammar, _call(path="null", limit="3"))
    assert not accepts(card, grammar, _call(path="NULL", limit="3"))
