"""Unit tests: /v1/completions honours response_format (json_object / json_schema) as vLLM's CompletionRequest does;
it used to be logged as an unknown field and ignored, so the text was not JSON."""
import pytest

from gateway.errors import InvalidRequest
from gateway.openai_completion import parse_completion
from tests.unit.test_grammar_tools import accepts, card  # noqa: F401  (card is a fixture)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "tag": {"enum": ["a", "b"]}},
          "required": ["n", "tag"], "additionalProperties": False}


def plan(card, **fields):
    return parse_completion({"model": "tiny", "prompt": "json please", "max_tokens": 32, **fields}, card, "tiny")


def test_json_schema_constrains_the_completion(card):
    constraint = plan(card, response_format={"type": "json_schema",
                                             "json_schema": {"name": "x", "strict": True, "schema": SCHEMA}}).gen.constraint
    assert constraint is not None and constraint.kind == "lark"
    assert accepts(card, constraint.grammar, '{"n": 5, "tag": "b"}')
    assert not accepts(card, constraint.grammar, '{"n": 5, "tag": "c"}')
    assert not accepts(card, constraint.grammar, "Sure, here it is")


def test_json_object_asks_for_any_object(card):
    constraint = plan(card, response_format={"type": "json_object"}).gen.constraint
    assert accepts(card, constraint.grammar, '{"k": [1, null]}') and not accepts(card, constraint.grammar, "[1]")


def test_text_format_leaves_the_completion_free(card):
    assert plan(card, response_format={"type": "text"}).gen.constraint is None


@pytest.mark.parametrize("fields, param", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}}},
     "response_format.json_schema.schema"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"response_format": {"type": "json_object"}, "guided_regex": "a+"}, "guided_regex"),
])
def test_bad_response_format_is_a_400(card, fields, param):
    with pytest.raises(InvalidRequest) as info:
        plan(card, **fields)
    assert info.value.status == 400 and info.value.param == param
