"""Unit tests: a schema that splits an object's keys across allOf branches, a $ref'd base and its extension, or an
object and the anyOf / oneOf beside it is served: the grammar accepts the objects the schema accepts (each key as the
part that owns it types it) and no other keys, on every route that takes a schema (a $ref beside properties, as draft
2020-12 allows it, is one more allOf branch) (closing each part to its own
properties left these unsatisfiable: a 400 'Unsatisfiable schema: required property ... is unsatisfiable')."""
import orjson
import pytest

from tests.unit.grammar_card import accepts, tiny_card

BOTH = {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                  {"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"]}]}
EXTENDED = {"$defs": {"Base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
            "allOf": [{"$ref": "#/$defs/Base"},
                      {"type": "object", "properties": {"name": {"enum": ["x", "y"]}}, "required": ["name"]}]}
BESIDE_REF = {"$defs": EXTENDED["$defs"], "$ref": "#/$defs/Base", "properties": {"name": {"enum": ["x", "y"]}},
              "required": ["name"]}
TAGGED = {"type": "object", "properties": {"kind": {"enum": ["p", "q"]}}, "required": ["kind"],
          "anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]}
DISCRIMINATED = {"type": "object", "properties": {"kind": {"enum": ["p", "q"]}}, "required": ["kind"],
                 "oneOf": [{"properties": {"kind": {"const": "p"}, "a": {"type": "integer"}}, "required": ["a"]},
                           {"properties": {"kind": {"const": "q"}, "b": {"type": "boolean"}}, "required": ["b"]}]}

CASES = [
    ("allOf", BOTH, ['{"a": 1, "b": true}'], ['{"a": 1}', '{"a": 1, "b": 2}',
                                                                     '{"a": 1, "b": true, "c": 3}']),
    ("allOf-ref-base", EXTENDED, ['{"id": 3, "name": "x"}'], ['{"id": 3}', '{"id": 3, "name": "z"}',
                                                             '{"id": 3, "name": "x", "c": 1}']),
    ("properties-beside-ref", BESIDE_REF, ['{"id": 3, "name": "x"}'],
     ['{"name": "x"}', '{"id": 3, "name": "x", "c": 1}']),
    ("object-beside-anyOf", TAGGED, ['{"kind": "p", "a": 1}', '{"kind": "q", "b": true}'],
     ['{"kind": "p"}', '{"kind": "p", "a": true}', '{"kind": "p", "a": 1, "c": 1}']),
    ("object-beside-oneOf", DISCRIMINATED, ['{"kind": "p", "a": 1}', '{"kind": "q", "b": true}'],
     ['{"kind": "p", "b": true}', '{"kind": "q", "a": 1}', '{"kind": "p", "a": 1, "c": 1}']),
]


@pytest.fixture(scope="module")
def card():
    return tiny_card()


@pytest.mark.parametrize("schema,valid,invalid", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_grammar_takes_what_the_composition_takes(card, schema, valid, invalid):
    assert [accepts(card, schema, text) for text in valid] == [True] * len(valid)
    assert [accepts(card, schema, text) for text in invalid] == [False] * len(invalid)


USER = [{"role": "user", "content": "hi"}]
TOOL = [{"type": "function", "function": {"name": "f", "parameters": BOTH}}]
ROUTES = [
    ("chat-response-format", "/v1/chat/completions",
     {"messages": USER, "enable_thinking": False,
      "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": EXTENDED}}}),
    ("completions-guided-json", "/v1/completions", {"prompt": "hi", "guided_json": TAGGED}),
    ("chat-forced-tool", "/v1/chat/completions", {"messages": USER, "tools": TOOL, "tool_choice": "required"}),
    ("responses", "/v1/responses", {"input": "hi", "text": {"format": {"type": "json_schema", "name": "x",
                                                                       "schema": DISCRIMINATED}}}),
    ("ollama-chat", "/api/chat", {"model": "fake-model", "messages": USER, "format": BOTH, "stream": False}),
]


@pytest.mark.parametrize("path,body", [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES])
async def test_composed_schemas_are_served_on_every_route(stack, path, body):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({"model": "default", **body}))
    assert response.status == 200, orjson.loads(await response.read())
    assert fake.script.requests[0].constraint is not None
