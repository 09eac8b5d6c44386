"""Ollama's `format` leaves a keyword its grammar cannot enforce unenforced, as llama.cpp's json-schema-to-grammar
(which builds Ollama's format grammar) skips every keyword it does not read; it was a 400 'format cannot be enforced
by constrained decoding: Unimplemented keys: ["uniqueItems"]' for a pydantic model with a set[str] field. /v1's
response_format keeps vLLM's 400."""
import asyncio

import llguidance
import pytest

from gateway.errors import InvalidRequest
from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.model import ModelCard
from gateway.ollama_request import parse_chat, parse_generate
from gateway.structured import response_format_schema, json_constraint

HI = [{"role": "user", "content": "Hi"}]
TAGS = {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3}
# (keyword, schema, an answer the keyword refuses and the rest of the schema allows)
SKIPPED = [("uniqueItems", {**TAGS, "uniqueItems": True}, '["a", "a"]'),
           ("not", {"type": "object", "properties": {"a": {"type": "integer", "not": {"const": 1}}}}, '{"a": 1}'),
           ("if-then", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
                        "if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]}}, '{"a": 1}'),
           ("contains", {**TAGS, "contains": {"const": "x"}}, '["a"]'),
           ("propertyNames", {"type": "object", "additionalProperties": {"type": "integer"},
                              "propertyNames": {"pattern": "^a"}}, '{"b": 1}'),
           ("dependentRequired", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                                  "dependentRequired": {"a": ["b"]}}, '{"a": 1}'),
           ("unevaluatedProperties", {"type": "object", "properties": {"a": {"type": "integer"}},
                                      "unevaluatedProperties": False}, '{"a": 1}'),
           ("overlapping-oneOf", {"type": "object", "properties": {"a": {"oneOf": [{"type": "integer"},
                                                                                   {"type": "number"}]}}}, '{"a": 1}')]


@pytest.fixture(scope="module")
def card() -> ModelCard:
    info = asyncio.run(FakeServing(build_tokenizer(), max_context_len=2048).Info(None, None))
    return ModelCard.from_info(info)


def _accepts(card, grammar: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(card.grammar_tokenizer(), llguidance.LLMatcher.grammar_from_lark(grammar),
                                   log_level=0)
    return matcher.consume_tokens(card.encode(text)) and matcher.is_accepting()


@pytest.mark.parametrize("schema, answer", [c[1:] for c in SKIPPED], ids=[c[0] for c in SKIPPED])
def test_ollama_format_leaves_the_keyword_unenforced(card, schema, answer):
    chat = parse_chat({"model": "default", "messages": HI, "format": schema, "think": False}, card, "x")
    generate = parse_generate({"model": "default", "prompt": "Hi", "raw": True, "format": schema}, card, "x")
    for plan in (chat, generate):
        assert plan.format_schema == schema and _accepts(card, plan.gen.constraint.grammar, answer)
        assert not _accepts(card, plan.gen.constraint.grammar, '"text"')


@pytest.mark.parametrize("schema, answer", [c[1:] for c in SKIPPED[:2]], ids=[c[0] for c in SKIPPED[:2]])
def test_ollama_format_with_tools_too(card, schema, answer):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    plan = parse_chat({"model": "default", "messages": HI, "format": schema, "think": False, "tools": tools}, card, "x")
    assert _accepts(card, plan.gen.constraint.grammar, answer)


def test_v1_response_format_keeps_vllms_400(card):
    schema = response_format_schema({"type": "json_schema", "json_schema": {"name": "x", "schema": SKIPPED[0][1]}})
    with pytest.raises(InvalidRequest, match='Unimplemented keys: \\["uniqueItems"\\]'):
        json_constraint(schema, False, card, "response_format")


def test_a_pattern_no_grammar_reads_is_still_a_400(card):
    body = {"model": "default", "messages": HI, "think": False,
            "format": {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?=x)x+$"}}}}
    with pytest.raises(InvalidRequest, match="(?s)format cannot be enforced by constrained decoding: .*look-around"):
        parse_chat(body, card, "x")


@pytest.mark.parametrize("fmt", ["json", {"type": "object", "properties": {"a": {"type": "integer"}}}],
                         ids=["json", "schema"])
def test_ollama_tools_beside_a_format_leave_their_keywords_unenforced_too(card, fmt):
    """A tool whose parameters hold a keyword the grammar has no rule for made any format a 400 ('format cannot be
    enforced by constrained decoding: Unimplemented keys: ["uniqueItems"]'); Ollama enforces no tool schema."""
    tags = {"type": "object", "properties": {"tags": SKIPPED[0][1]}, "required": ["tags"]}
    tools = [{"type": "function", "function": {"name": "f", "parameters": tags}}]
    plan = parse_chat({"model": "default", "messages": HI, "format": fmt, "think": False, "tools": tools}, card, "x")
    call = '<tool_call>\n<function=f>\n<parameter=tags>\n["a", "a"]\n</parameter>\n</function>\n</tool_call>'
    assert _accepts(card, plan.gen.constraint.grammar, call)
    assert not _accepts(card, plan.gen.constraint.grammar, call.replace('["a", "a"]', '"a"'))
