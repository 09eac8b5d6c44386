"""Unit tests: a value a schema leaves open (pydantic's `Any` field, a bare dict or list, `{}`) is written with finite
numbers, as every typed number of the grammar copy is: llguidance's own rule for it wrote -39.2e16426212997220033224538
and [79E0649] (Python and pydantic read inf, Go's encoding/json refuses them)."""

import json
import math
from typing import Any

import pytest
from pydantic import BaseModel

from gateway.structured import checked, json_grammar
from tests.unit.grammar_card import accepts, random_answer, tiny_card


class Record(BaseModel):
    """Typical open fields: Any, a bare dict, a bare list."""
    x: Any
    meta: dict
    items: list


def _numbers(value):
    if isinstance(value, float):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)


OPEN = {"pydantic-any-dict-list": Record.model_json_schema(), "empty": {}, "bare-array": {"type": "array"},
        "bare-object": {"type": "object"}, "items-true": {"type": "array", "items": True, "maxItems": 3},
        "nullable-any": {"type": "object", "properties": {"v": {"anyOf": [{}, {"type": "null"}]}}, "required": ["v"]}}


@pytest.mark.parametrize("schema", OPEN.values(), ids=OPEN.keys())
def test_open_values_have_finite_numbers(schema):
    card = tiny_card()
    for seed in range(40):
        answer = random_answer(card, schema, seed, max_tokens=300)
        if answer is not None:
            assert all(math.isfinite(n) for n in _numbers(json.loads(answer))), (seed, answer)


def test_open_values_still_take_any_json():
    card, schema = tiny_card(), Record.model_json_schema()
    assert accepts(card, schema, '{"x": [1, "a", null, {"k": true}], "meta": {"n": 2.5}, "items": [[], {}]}')
    assert accepts(card, schema, '{"x": -7, "meta": {}, "items": []}')
    assert not accepts(card, schema, '{"x": 1e999, "meta": {}, "items": []}')


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"x": {"$id": "https://example.com/x", "type": "object",
                                           "properties": {"y": {}}, "required": ["y"]}}, "required": ["x"]},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "integer"}, {}],
     "additionalItems": False}], ids=["nested-id", "draft-07-tuple"])
def test_schemas_with_their_own_base_or_tuple_items_are_served(schema):
    """A subschema with its own $id resolves "#/$defs/..." against itself: it is left as sent, never a 400."""
    card = tiny_card()
    checked(json_grammar(schema, False, card), card, "response_format")
    assert all(random_answer(card, schema, seed, max_tokens=300) != "" for seed in range(5))
