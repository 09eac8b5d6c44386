"""llama.cpp's response_format forms with the schema beside the type (its README: {"type": "json_object", "schema":
...} and {"type": "json_schema", "schema": ...}) constrain the answer to that schema, on chat and completions. Before,
the first was any JSON object (the schema dropped: measured on a stack on port 8230, a schema requiring {"a": integer}
answered '{") hCTanan=get.__": true, ...') and the second a 400 'response_format json_schema needs json_schema.schema'."""
import pytest

from gateway.errors import InvalidRequest
from gateway.openai import parse_chat
from gateway.openai_completion import parse_completion
from tests.unit.test_grammar_tools import accepts, card  # noqa: F401  (card is a fixture)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}
USER = [{"role": "user", "content": "json please"}]


def _constraint(card, route: str, response_format: dict):
    if route == "chat":
        body = {"messages": USER, "max_tokens": 32, "enable_thinking": False, "response_format": response_format}
        return parse_chat(body, card, "tiny").gen.constraint
    body = {"prompt": "json please", "max_tokens": 32, "response_format": response_format}
    return parse_completion(body, card, "tiny").gen.constraint


@pytest.mark.parametrize("route", ["chat", "completions"])
@pytest.mark.parametrize("kind", ["json_object", "json_schema"])
def test_the_schema_beside_the_type_constrains_the_answer(card, route, kind):
    grammar = _constraint(card, route, {"type": kind, "schema": SCHEMA}).grammar
    assert accepts(card, grammar, '{"n": 5}')
    assert not accepts(card, grammar, '{"m": 5}') and not accepts(card, grammar, "{}")


def test_a_schema_of_another_type_than_object(card):
    grammar = _constraint(card, "chat", {"type": "json_object", "schema": {"type": "string", "maxLength": 3}}).grammar
    assert accepts(card, grammar, '"abc"') and not accepts(card, grammar, '{"k": 1}')


def test_openais_form_wins_and_json_object_alone_stays_any_object(card):
    wrapped = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}, "schema": {"type": "string"}}
    assert accepts(card, _constraint(card, "chat", wrapped).grammar, '{"n": 1}')
    grammar = _constraint(card, "chat", {"type": "json_object"}).grammar
    assert accepts(card, grammar, '{"k": [1, null]}') and not accepts(card, grammar, '"abc"')


@pytest.mark.parametrize("response_format, param", [
    ({"type": "json_object", "schema": {"type": "strng"}}, "response_format.schema"),
    ({"type": "json_schema"}, "response_format.json_schema"),
])
def test_a_bad_or_missing_schema_is_a_400(card, response_format, param):
    with pytest.raises(InvalidRequest) as info:
        _constraint(card, "chat", response_format)
    assert info.value.status == 400 and info.value.param == param
