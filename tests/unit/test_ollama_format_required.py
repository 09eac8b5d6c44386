"""Ollama `format` with a `required` that is no list (draft-03's `"required": true` on a property, a lone name) is
served with those properties optional, as Ollama serves it: llama.cpp's json-schema-to-grammar (common/
json-schema-to-grammar.cpp visit()) reads `required` only as an array. It was the 400 'format is not a valid JSON
Schema: true is not of type "array"'."""
import llguidance
import orjson
import pytest

from gateway.schema_bounds import without_stray_required
from tests.unit.grammar_card import tiny_card

DRAFT3 = {"type": "object", "properties": {"a": {"type": "string", "required": True},
                                           "b": {"type": "object", "required": True,
                                                 "properties": {"c": {"type": "integer", "required": False}}}}}
LONE = {"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"}
# A property named "required" is a property, not the keyword.
NAMED = {"type": "object", "properties": {"required": {"type": "boolean"}}, "required": ["required"]}


@pytest.mark.parametrize("path, extra", [("/api/generate", {"prompt": "x"}),
                                         ("/api/chat", {"messages": [{"role": "user", "content": "x"}]})],
                         ids=["generate", "chat"])
@pytest.mark.parametrize("schema", [DRAFT3, LONE], ids=["draft-03", "lone-name"])
async def test_a_stray_required_is_ignored_as_ollama_ignores_it(stack, path, extra, schema):
    client, servicer = stack
    servicer.script.reply = "{}"
    response = await client.post(path, json={"model": "fake-model", "stream": False, "think": False,
                                             "format": schema, **extra})
    assert response.status == 200, await response.text()
    answer = orjson.loads(await response.read())
    assert (answer.get("response") or answer["message"]["content"]) == "{}"
    grammar = servicer.script.requests[-1].constraint.grammar
    assert '"required": true' not in grammar and '"required": "a"' not in grammar


async def test_tools_with_it_are_ollamas_decode_error(stack):
    """A tool's parameters are no free JSON to Ollama but api.ToolProperty structs, whose `required` is a []string:
    encoding/json refuses draft-03's `"required": true` there before anything reads the format (it was served
    here beside a format, as the format's own schema is)."""
    client, servicer = stack
    tools = [{"type": "function", "function": {"name": "f", "parameters": DRAFT3}}]
    response = await client.post("/api/chat", json={"model": "fake-model", "stream": False, "think": False,
                                                    "format": "json", "tools": tools,
                                                    "messages": [{"role": "user", "content": "x"}]})
    assert response.status == 400 and not servicer.script.requests
    assert orjson.loads(await response.read()) == {"error": "json: cannot unmarshal bool into Go struct field "
                                                   "ToolFunctionParameters.tools.function.parameters.properties."
                                                   "required of type []string"}


def test_the_properties_become_optional_and_a_property_named_required_stays():
    card = tiny_card()
    assert without_stray_required(NAMED) == NAMED
    cleaned = without_stray_required(DRAFT3)
    assert cleaned == {"type": "object", "properties": {"a": {"type": "string"}, "b": {
        "type": "object", "properties": {"c": {"type": "integer"}}}}}
    assert DRAFT3["properties"]["a"]["required"] is True  # the client's schema is left as sent
    from gateway.structured import json_grammar
    grammar = llguidance.LLMatcher.grammar_from_lark(json_grammar(cleaned, False, card))
    matcher = llguidance.LLMatcher(card.grammar_tokenizer(), grammar, log_level=0)
    assert matcher.consume_tokens(card.encode("{}")) and matcher.is_accepting()


@pytest.mark.parametrize("schema, cleaned", [
    ({"type": "object", "properties": [], "required": True}, {"type": "object", "properties": []}),
    ({"anyOf": {"type": "string"}, "required": "a"}, {"anyOf": {"type": "string"}}),
    ({"properties": {"a": {"required": 1}}, "required": None}, {"properties": {"a": {}}}),
], ids=["properties-list", "anyof-object", "numbers"])
def test_a_malformed_schema_is_walked_without_error(schema, cleaned):
    """The walk runs before the meta-schema check: other keywords of the wrong type are left for it to refuse."""
    assert without_stray_required(schema) == cleaned
