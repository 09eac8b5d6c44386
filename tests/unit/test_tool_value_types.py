"""Tool-call argument values typed by the whole parameter schema, not its `type` alone.

`<parameter=limit>\\n4\\n</parameter>` for a parameter {"type": ["string", "null"]}, pydantic's Optional[str]
(anyOf string / null) or {"enum": ["4", "5"]} came back as the number 4, which the schema refuses (the case
smg-project/smg#1841's review names for nullable strings); an empty tag for an optional integer came back as ""
(sgl-project/sglang#36835). Now the reading the schema accepts is taken, and the empty optional one is left out."""
import json

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.tools import parse_tool_calls
from tests.unit.tool_deltas import first_call_arguments, join_calls, ollama_call_arguments

DEFS = {"Code": {"type": "string"}}
PARAMS = {
    "type": "object", "$defs": DEFS,
    "properties": {"nullable": {"type": ["string", "null"]},
                   "optional": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                   "choice": {"enum": ["4", "5"]},
                   "code": {"$ref": "#/$defs/Code"},
                   "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
                   "count": {"type": "integer"},
                   "limit": {"type": "integer"},
                   "number_or_text": {"type": ["integer", "string"]}},
    "required": ["limit"],
}
TOOLS = [{"type": "function", "function": {"name": "find", "parameters": PARAMS}}]


def _call(**values) -> str:
    params = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in values.items())
    return f"<tool_call>\n<function=find>\n{params}</function>\n</tool_call>"


def _arguments(text: str) -> dict:
    return json.loads(parse_tool_calls(text, TOOLS)[0]["function"]["arguments"])


@pytest.mark.parametrize("key", ["nullable", "optional", "choice", "code"])
def test_digits_for_a_parameter_that_takes_only_strings_stay_a_string(key):
    assert _arguments(_call(**{key: "4", "limit": "1"})) == {key: "4", "limit": 1}


def test_a_value_the_first_reading_fits_keeps_it():
    text = _call(nullable="null", optional="Paris", tags="['a', 'b']", number_or_text="12", limit="3")
    assert _arguments(text) == {"nullable": None, "optional": "Paris", "tags": ["a", "b"], "number_or_text": 12,
                                "limit": 3}


@pytest.mark.parametrize("word", ["None", "null", "NULL"])
def test_a_null_word_for_a_nullable_parameter_is_null(word):
    # Qwen3.5's template writes a null argument as Python's None, so the model does too; for pydantic's
    # Optional[str] (anyOf string / null) that came back as the string "None", where vLLM's qwen3_coder parser
    # (_convert_param_value, allows_null) and the ["string", "null"] form here give null. A plain string keeps None;
    # null is null for every parameter (test_tool_null_word.py).
    text = _call(nullable=word, optional=word, tags=word, code=word, limit="1")
    code = None if word.lower() == "null" else word
    assert _arguments(text) == {"nullable": None, "optional": None, "tags": None, "code": code, "limit": 1}


def test_an_empty_optional_value_of_another_type_is_left_out():
    assert _arguments(_call(count="", optional="", limit="")) == {"optional": "", "limit": ""}


def test_a_value_no_reading_fits_stays_the_text():
    assert _arguments(_call(count="many", limit="2")) == {"count": "many", "limit": 2}


async def test_the_chat_answer_carries_the_typed_arguments_streamed_and_not():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    fake.script.reply = _call(optional="2024", count="", limit="7")
    body = {"messages": [{"role": "user", "content": "find"}], "tools": TOOLS, "enable_thinking": False}
    async with fake_gateway(fake) as (client, _):
        answer = orjson.loads(await (await client.post("/v1/chat/completions", json=body)).read())
        streamed = (await (await client.post("/v1/chat/completions", json={**body, "stream": True})).read()).decode()
    call = answer["choices"][0]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "find", "arguments": '{"optional":"2024","limit":7}'}
    chunks = [orjson.loads(line[6:]) for line in streamed.split("\n\n") if line.startswith("data: {")]
    deltas = [tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls") or []]
    assert [d["function"] for d in join_calls(deltas)] == [{"name": "find", "arguments": '{"optional":"2024","limit":7}'}]


@pytest.mark.parametrize("raw", ["1e3", "12345678901234567890", "true", "None", "[1, 2]", "007", "Paris"])
def test_a_parameter_the_tool_does_not_declare_stays_its_text(raw):
    # It came back typed as JSON (1e3 as 1000.0, true as true, null as null): a type no schema gave, where vLLM's
    # qwen3_coder (_convert_param_value: not in the tool's parameters -> the string) and Ollama's parser (no type ->
    # the raw text) return the text.
    assert _arguments(_call(limit="1", undeclared=raw)) == {"limit": 1, "undeclared": raw}
    tools = [{"type": "function", "function": {"name": "find", "parameters": {"type": "object"}}}]
    call = parse_tool_calls(_call(anything=raw), tools)[0]
    assert json.loads(call["function"]["arguments"]) == {"anything": raw}
    # A parameter typed by additionalProperties is read by that schema.
    typed = [{"type": "function", "function": {"name": "find", "parameters": {
        "type": "object", "additionalProperties": {"type": "integer"}}}}]
    assert json.loads(parse_tool_calls(_call(n="5"), typed)[0]["function"]["arguments"]) == {"n": 5}


@pytest.mark.parametrize("raw, value", [('"[\\"a\\", \\"b\\"]"', ["a", "b"]), ("\"['a']\"", ["a"]),
                                        ('"[1]"', "[1]")], ids=["json-string-of-a-list", "of-a-python-list",
                                                                 "no-list-of-strings"])
async def test_a_container_written_as_a_json_string_is_the_container(stack, raw, value):
    """An array or object the model writes as the JSON string of its text ("[\\"a\\"]", "{'k': 'v'}": what a template
    rendering json.dumps(str(value)) teaches) is the container, as vLLM's qwen3_coder decodes it once more
    (_convert_param_value: json.loads, then ast.literal_eval of the string); it came back as the string. A string
    whose text the schema still refuses stays that string. Every route, streamed or not."""
    client, fake = stack
    fake.script.reply = _call(tags=raw, limit="1")
    for stream in (False, True):
        body = {"model": "default", "messages": [{"role": "user", "content": "find"}], "tools": TOOLS,
                "enable_thinking": False, "stream": stream}
        raw_answer = await (await client.post("/v1/chat/completions", json=body)).read()
        ollama = await (await client.post("/api/chat", json={**body, "think": False})).read()
        assert json.loads(first_call_arguments(raw_answer, stream)) == {"tags": value, "limit": 1}
        assert ollama_call_arguments(ollama) == [{"tags": value, "limit": 1}]
