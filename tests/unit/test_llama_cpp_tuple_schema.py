"""A tuple written as an `items` list (draft-07's form, as zod-to-json-schema writes one) in the schema fields whose
grammar llama.cpp's json-schema-to-grammar builds on the server defining them: llama.cpp's json_schema and
response_format {type: json_object, schema}, Ollama's format. llama-server's own test serves
{"type": "json_object", "schema": {"items": [{"type": "integer"}]}} with "[ -3000 ]"
(tools/server/tests/unit/test_chat_completion.py test_completion_with_response_format); its converter writes the list
as exactly those items in order. It was the 400 'response_format.schema is not a valid JSON Schema: [{"type":
"integer"}] is not of type "object", "boolean" (at $.items)' (2020-12's meta-schema) on /v1, /chat/completions and
/completion. vLLM's response_format json_schema keeps vLLM's reading (2020-12 without a $schema)."""
import pytest

from gateway.errors import InvalidRequest
from jsonschema import Draft202012Validator

from gateway.ollama_request import _format_schema
from gateway.openai import parse_chat
from tests.unit.test_llama_cpp_json_schema_lenient import _completion
from tests.unit.test_lenient_schemas import _accepts, card  # noqa: F401 - card is the module's fixture

HI = [{"role": "user", "content": "Hi"}]
OFF = {"enable_thinking": False}
TUPLE = {"items": [{"type": "integer"}, {"type": "string"}]}


def _grammar(card, where: str, schema: dict) -> str:
    if where == "completion json_schema":
        return _completion({"prompt": "Hi", "json_schema": schema}, card).gen.constraint.grammar
    fields = {"json_schema": schema} if where == "chat json_schema" else {
        "response_format": {"type": "json_object", "schema": schema}}
    return parse_chat({"messages": HI, "chat_template_kwargs": OFF, **fields}, card, "x").gen.constraint.grammar


@pytest.mark.parametrize("where", ["completion json_schema", "chat json_schema", "chat response_format"])
def test_an_items_list_is_the_tuple_llama_cpp_makes_of_it(card, where):
    grammar = _grammar(card, where, TUPLE)
    assert _accepts(card, grammar, '[-3000, "a"]')
    # Exactly those items, in order, as llama.cpp's "[" item0 "," item1 "]" rule.
    for wrong in ('["a", 1]', "[1]", '[1, "a", 2]', "[]"):
        assert not _accepts(card, grammar, wrong), wrong


def test_additional_items_keep_their_meaning(card):
    grammar = _grammar(card, "chat json_schema", {**TUPLE, "additionalItems": {"type": "boolean"}})
    assert _accepts(card, grammar, '[1, "a", true]')
    assert not _accepts(card, grammar, '[1, "a", 2]')


def test_nested_tuples_and_data_left_alone(card):
    schema = {"type": "object", "properties": {"p": TUPLE, "q": {"const": {"items": [1]}}}, "required": ["p", "q"]}
    grammar = _grammar(card, "completion json_schema", schema)
    assert _accepts(card, grammar, '{"p": [1, "a"], "q": {"items": [1]}}')
    assert not _accepts(card, grammar, '{"p": ["a"], "q": {"items": [1]}}')


def test_ollamas_format_too():
    """Ollama builds its format grammar with llama.cpp's converter (llm/llama_server.go SchemaToGrammar)."""
    schema = Draft202012Validator(_format_schema(TUPLE))
    assert schema.is_valid([1, "a"]) and not schema.is_valid(["a", 1]) and not schema.is_valid([1, "a", 2])


def test_vllms_json_schema_keeps_its_400(card):
    body = {"messages": HI, "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": TUPLE}}}
    with pytest.raises(InvalidRequest, match="is not a valid JSON Schema"):
        parse_chat(body, card, "x")
