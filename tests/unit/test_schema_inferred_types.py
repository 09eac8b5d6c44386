"""A JSON schema node with no `type` is read by the structure it describes, as vLLM's xgrammar (cpp/
json_schema_converter.cc: `properties` / `additionalProperties` -> object, `items` / `prefixItems` -> array) and
llama.cpp's json-schema-to-grammar (common/json-schema-to-grammar.cpp visit(), which builds Ollama's `format` grammar;
also `pattern` and a date / uuid `format` -> string) read it: JSON Schema itself lets any other type through there, and the grammar let the model answer `5` for
{"properties": {"a": ...}, "required": ["a"]} (Ollama `format`, measured on the tiny model) or `{"b": null}` where b's
subschema listed required properties without a type."""
import orjson
import pytest
from jsonschema import Draft202012Validator

from gateway.schema_bounds import bounded_schema
from tests.unit.grammar_card import accepts, random_answer, tiny_card

OBJECT = {"properties": {"a": {"type": "integer"}}, "required": ["a"]}
NESTED = {"type": "object", "properties": {"b": {"properties": {"c": {"type": "integer"}}, "required": ["c"]}},
          "required": ["b"]}
CLOSED = {"additionalProperties": False}
MAP = {"additionalProperties": {"type": "integer"}}
ARRAY = {"items": {"type": "integer"}, "minItems": 1}
TUPLE = {"prefixItems": [{"type": "integer"}, {"type": "boolean"}]}
IN_DEFS = {"$defs": {"P": {"properties": {"x": {"type": "string"}}, "required": ["x"]}},
           "type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "required": ["p"]}
IN_LIST = {"type": "array", "items": {"properties": {"k": {"type": "boolean"}}, "required": ["k"]}, "minItems": 1}
# llama.cpp (Ollama's format) reads a pattern or a date / uuid format with no type as a string's.
PATTERN = {"type": "object", "properties": {"zip": {"pattern": "^[0-9]{5}$"}}, "required": ["zip"]}
DATE = {"type": "object", "properties": {"day": {"format": "date"}}, "required": ["day"]}


@pytest.fixture(scope="module")
def card():
    return tiny_card()


@pytest.mark.parametrize("schema, text", [
    (OBJECT, "5"), (OBJECT, '"a"'), (OBJECT, "[1]"), (NESTED, '{"b": null}'), (NESTED, '{"b": 7}'),
    (CLOSED, "true"), (MAP, '"x"'), (ARRAY, '{"0": 1}'), (TUPLE, "null"), (IN_DEFS, '{"p": 1}'),
    (IN_LIST, "[3]"), (PATTERN, '{"zip": 12345}'), (PATTERN, '{"zip": null}'), (DATE, '{"day": 20260101}'),
], ids=["object-number", "object-string", "object-array", "nested-null", "nested-number", "closed-bool",
        "map-string", "array-object", "tuple-null", "defs-number", "items-number", "pattern-number", "pattern-null",
        "date-number"])
def test_a_value_of_another_type_is_refused(card, schema, text):
    """Each text is valid JSON Schema (a keyword of one type says nothing of another) yet no answer xgrammar or
    llama.cpp's grammar lets through."""
    assert Draft202012Validator(schema).is_valid(orjson.loads(text))
    assert not accepts(card, schema, text)


@pytest.mark.parametrize("schema, text", [
    (OBJECT, '{"a": 1}'), (NESTED, '{"b": {"c": 2}}'), (CLOSED, "{}"), (MAP, '{"k": 3}'), (ARRAY, "[1, 2]"),
    (TUPLE, "[1, true]"), (IN_DEFS, '{"p": {"x": "y"}}'), (IN_LIST, '[{"k": false}]'), (PATTERN, '{"zip": "12345"}'),
    (DATE, '{"day": "2026-01-01"}'),
], ids=["object", "nested", "closed", "map", "array", "tuple", "defs", "items", "pattern", "date"])
def test_the_inferred_type_is_still_written(card, schema, text):
    assert accepts(card, schema, text)


@pytest.mark.parametrize("schema, kind", [(OBJECT, dict), (NESTED, dict), (ARRAY, list), (IN_DEFS, dict),
                                          (IN_LIST, list)], ids=["object", "nested", "array", "defs", "items"])
def test_every_random_answer_is_of_the_inferred_type_and_valid(card, schema, kind):
    for seed in range(6):
        text = random_answer(card, schema, seed, max_tokens=120)
        if text is None:
            continue
        value = orjson.loads(text)
        assert isinstance(value, kind) and Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize("schema", [
    {"anyOf": [{"type": "string"}, {"type": "integer"}], "properties": {"a": {"type": "integer"}}},
    {"not": {"properties": {"a": {"const": 1}}}},
    {"if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["a"]}},
    {"enum": [1, {"a": 2}], "properties": {"a": {"type": "integer"}}},
    {"title": "Any", "description": "left open"},
    {"additionalProperties": True},
], ids=["any-of", "not", "if", "enum", "annotations", "open-extra"])
def test_a_node_that_something_else_decides_gets_no_type(schema):
    """A composition, a literal or a condition decides the type; narrowing under `not` or `if` would widen the
    schema; annotations alone and additionalProperties: true infer nothing (llama.cpp reads them as any value)."""
    out = bounded_schema(schema, 24)
    assert "type" not in out
    assert all("type" not in out.get(key, {}) for key in ("not", "if"))
