"""Schemas as clients write them: the draft their $schema names, and string formats the grammar has no rule for.

A draft-07 tuple ("items": [..], as zod-to-json-schema writes it) or a draft-04 boolean exclusiveMinimum was a 400
"is not a valid JSON Schema" (checked as 2020-12 whatever $schema said), and a format llguidance does not know
(pydantic's binary / password / path, OpenAPI's byte, uri-reference) a 400 "Unknown format": JSON Schema leaves an
unknown format unchecked. Both are served now, on every route that takes a schema (fake scheduler)."""

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.schema_dates import FORMAT_PATTERNS
from gateway.structured import bounded_schema
from tests.unit.grammar_card import accepts, tiny_card

USER = [{"role": "user", "content": "hi"}]
TUPLE_07 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
            "items": [{"type": "string", "maxLength": 3}, {"type": "integer"}], "additionalItems": False}
EXCLUSIVE_04 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "required": ["n"],
                "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}}}
FORMATS = {"type": "object", "required": ["blob", "secret", "link", "when"],
           "properties": {"blob": {"type": "string", "format": "binary"},
                          "secret": {"type": "string", "format": "password"},
                          "link": {"type": "string", "format": "uri-reference"},
                          "when": {"type": "string", "format": "date-time"}}}


def _bodies(schema: dict) -> list:
    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    # A tool's $schema sits at the root of its parameters, as zod-to-json-schema writes it.
    inner = {key: value for key, value in schema.items() if key != "$schema"}
    draft = {"$schema": schema["$schema"]} if "$schema" in schema else {}
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        **draft, "type": "object", "properties": {"p": inner}, "required": ["p"]}}}
    return [
        ("/v1/chat/completions", {"messages": USER, "response_format": rf}),
        ("/v1/chat/completions", {"messages": USER, "tools": [tool], "tool_choice": "required"}),
        ("/v1/completions", {"prompt": "hi", "guided_json": schema}),
        ("/api/chat", {"model": "fake-model", "messages": USER, "format": schema, "stream": False}),
        ("/v1/messages", {"model": "fake-model", "max_tokens": 8, "messages": USER,
                          "output_config": {"format": {"type": "json_schema", "schema": schema}}}),
        ("/v1/responses", {"input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": schema}}}),
    ]


CASES = [(name, path, body) for name, schema in (("tuple-07", TUPLE_07), ("exclusive-04", EXCLUSIVE_04),
                                                 ("formats", FORMATS))
         for path, body in _bodies(schema)]


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    async with fake_gateway(fake) as pair:
        yield pair


@pytest.mark.parametrize("path,body", [c[1:] for c in CASES], ids=[f"{c[0]}-{c[1]}" for c in CASES])
async def test_the_schema_is_served_with_its_grammar(stack, path, body):
    client, fake = stack
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    assert fake.script.requests[-1].constraint.kind == "lark"


async def test_a_schema_its_own_draft_refuses_is_still_a_400(stack):
    client, _ = stack
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "minProperties": -1}
    body = {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {"name": "x",
                                                                                         "schema": schema}}}
    response = await client.post("/v1/chat/completions", json=body)
    error = orjson.loads(await response.read())["error"]
    assert response.status == 400 and error["param"] == "response_format.json_schema.schema"
    assert error["message"].startswith("response_format.json_schema.schema is not a valid JSON Schema: -1")


def test_the_grammar_copy_drops_unknown_formats_and_bounds_those_strings():
    bounded = bounded_schema(FORMATS, 24)["properties"]
    assert bounded["blob"] == {"type": "string", "maxLength": 24}
    assert bounded["link"] == {"type": "string", "maxLength": 24}
    assert bounded["when"] == {"type": "string", "format": "date-time", "pattern": FORMAT_PATTERNS["date-time"]}


@pytest.fixture(scope="module")
def card():
    return tiny_card()


def test_the_older_drafts_are_enforced_as_they_mean(card):
    assert accepts(card, TUPLE_07, '["abc", 7]')
    assert not accepts(card, TUPLE_07, '[7, "abc"]') and not accepts(card, TUPLE_07, '["abc", 7, 8]')
    assert accepts(card, EXCLUSIVE_04, '{"n": 1}') and not accepts(card, EXCLUSIVE_04, '{"n": 0}')
