"""Unit tests: schemas the gateway turns into grammars, on every API surface: a grammar that allows no output is a
400 before the request starts, map keys are bounded like every other string, and Anthropic's beta output_format is honoured like output_config.format."""

import orjson
import pytest

from gateway.structured import bounded_schema, max_string_chars
from tests.unit.grammar_card import accepts, tiny_card

USER = [{"role": "user", "content": "hi"}]
SELF = {"$ref": "#"}
LOOP = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
# A required property whose value is the property again: `{"x": ` is forced, then nothing (its first mask is fine).
DEEP = {"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}, "required": ["x"]}
NO_OUTPUT = "cannot be enforced by constrained decoding: the grammar allows no output (NoExtensionBias)"

def _rf(schema) -> dict:
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}


def _v1_error(param: str) -> dict:
    return {"error": {"message": f"{param} {NO_OUTPUT}", "type": "invalid_request_error", "param": param,
                      "code": "unsupported_schema"}}


NO_OUTPUT_CASES = [
    ("chat-response-format", "/v1/chat/completions", {"messages": USER, "enable_thinking": False, **_rf(SELF)},
     _v1_error("response_format")),
    ("chat-thinking-on", "/v1/chat/completions", {"messages": USER, "enable_thinking": True, **_rf(LOOP)},
     _v1_error("response_format")),
    ("chat-stream", "/v1/chat/completions", {"messages": USER, "stream": True, **_rf(SELF)},
     _v1_error("response_format")),
    ("chat-guided-json", "/v1/chat/completions", {"messages": USER, "guided_json": LOOP}, _v1_error("guided_json")),
    ("chat-guided-grammar", "/v1/chat/completions", {"messages": USER, "guided_grammar": "start: start \"x\""},
     _v1_error("guided_grammar")),
    ("completions", "/v1/completions", {"prompt": "hi", **_rf(SELF)}, _v1_error("response_format")),
    ("chat-forced-text", "/v1/chat/completions", {"messages": USER, "enable_thinking": False, **_rf(DEEP)},
     _v1_error("response_format")),
    ("chat-stream-forced-text", "/v1/chat/completions", {"messages": USER, "stream": True, **_rf(DEEP)},
     _v1_error("response_format")),
    ("ollama-forced-text", "/api/chat", {"model": "fake-model", "messages": USER, "format": DEEP, "stream": False},
     {"error": f"format {NO_OUTPUT}"}),
    ("responses", "/v1/responses", {"input": "hi", "text": {"format": {"type": "json_schema", "name": "x",
                                                                       "schema": SELF}}},
     _v1_error("text.format")),
    ("ollama-chat", "/api/chat", {"model": "fake-model", "messages": USER, "format": SELF, "stream": False},
     {"error": f"format {NO_OUTPUT}"}),
    ("ollama-generate", "/api/generate", {"model": "fake-model", "prompt": "hi", "format": LOOP, "stream": False},
     {"error": f"format {NO_OUTPUT}"}),
    ("anthropic", "/v1/messages", {"model": "fake-model", "max_tokens": 8, "messages": USER,
                                   "output_config": {"format": {"type": "json_schema", "schema": SELF}}},
     {"type": "error", "error": {"type": "invalid_request_error", "message": f"output_config.format {NO_OUTPUT}"}}),
]


@pytest.mark.parametrize("path,body,expected", [c[1:] for c in NO_OUTPUT_CASES], ids=[c[0] for c in NO_OUTPUT_CASES])
async def test_grammar_that_allows_no_output_is_a_400_before_the_request_starts(stack, path, body, expected):
    """vLLM #57725: {"$ref": "#"} compiled, then failed the request mid-generation (a 400 with param null here,
    "constrained decoding failed: NoExtensionBias", after the request had reached the worker); DEEP's first mask is
    fine, and it failed after the text the grammar forces (streamed: a 200 whose answer broke off with an error)."""
    client, fake = stack
    before = len(fake.script.requests)
    response = await client.post(path, json=body)
    assert response.status == 400
    got = orjson.loads(await response.read())
    got.pop("request_id", None)
    assert got == expected
    assert len(fake.script.requests) == before


@pytest.fixture(scope="module")
def card():
    return tiny_card()


def test_map_keys_are_bounded_like_strings(card):
    """dict[str, int] ({"additionalProperties": {...}} alone) let the random model write one key until max_tokens."""
    schema = {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 2}
    assert bounded_schema(schema, 24) == {
        "type": "object", "patternProperties": {"^.{0,24}$": {"type": "integer", "minimum": 1 - 10**18,
                                                              "maximum": 10**18 - 1}}, "additionalProperties": False,
        "maxProperties": 2, "x-guidance": {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}}
    key = "k" * max_string_chars()
    assert accepts(card, schema, f'{{"{key}": 1}}') and not accepts(card, schema, f'{{"{key}x": 1}}')


def test_pattern_property_values_are_bounded():
    schema = {"type": "object", "patternProperties": {"^a": {"type": "string"}}}
    assert bounded_schema(schema, 24)["patternProperties"] == {"^a": {"type": "string", "maxLength": 24}}


ANTHROPIC = {"model": "fake-model", "max_tokens": 64, "messages": USER, "thinking": {"type": "disabled"}}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


async def test_anthropic_beta_output_format_constrains_the_answer(stack):
    """output_format (the structured-outputs beta's field) was ignored: free text, no grammar."""
    client, fake = stack
    fake.script.reply = '{"city": "Paris"}'
    body = {**ANTHROPIC, "output_format": {"type": "json_schema", "schema": SCHEMA}}
    answer = orjson.loads(await (await client.post("/v1/messages", json=body)).read())
    assert answer["content"] == [{"type": "text", "text": '{"city": "Paris"}'}]
    assert '"required": ["city"]' in fake.script.requests[-1].constraint.grammar


@pytest.mark.parametrize("output_format,status", [({"type": "json_schema", "schema": {"type": "object"}}, 400),
                                                  ({"type": "text"}, 400)], ids=["differs", "bad-type"])
async def test_anthropic_output_format_conflict_or_bad_type_is_a_400(stack, output_format, status):
    client, _ = stack
    body = {**ANTHROPIC, "output_format": output_format,
            "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}}
    response = await client.post("/v1/messages", json=body)
    assert response.status == status
    error = orjson.loads(await response.read())
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith("output_format")


async def test_a_recursion_with_a_way_out_is_served(stack):
    """A tree whose children may be none is written: following the forced text stops at the grammar's first choice."""
    client, fake = stack
    tree = {"$defs": {"n": {"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                            "required": ["c"]}}, "$ref": "#/$defs/n"}
    fake.script.reply = '{"c": []}'
    response = await client.post("/v1/chat/completions", json={"messages": USER, "enable_thinking": False, **_rf(tree)})
    assert response.status == 200
    assert (await response.json())["choices"][0]["message"]["content"] == '{"c": []}'
