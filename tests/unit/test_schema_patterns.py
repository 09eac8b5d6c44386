"""Unit tests: a schema `pattern` is an ECMA-262 regex (JSON Schema's dialect), read as llguidance enforces it, not
refused because Python's re cannot read it (Unicode classes, JavaScript's named groups)."""

import re

import orjson
import pytest

from gateway.structured import checked, json_grammar
from tests.unit.grammar_card import accepts, random_answer, tiny_card

USER = [{"role": "user", "content": "hi"}]
DATE = r"^(?<year>\d{4})-(?<month>\d{2})$"
NAME = r"^\p{Lu}\p{Ll}+$"
SCHEMA = {"type": "object", "properties": {"when": {"type": "string", "pattern": DATE},
                                           "who": {"type": "string", "pattern": NAME}},
          "required": ["when", "who"], "additionalProperties": False}
REPLY = '{"when": "2026-11", "who": "Émile"}'
TOOL = {"type": "function", "function": {"name": "meet", "parameters": SCHEMA}}
CALL = ("<tool_call>\n<function=meet>\n<parameter=when>\n2026-11\n</parameter>\n<parameter=who>\nÉmile\n"
        "</parameter>\n</function>\n</tool_call>")


async def _post(client, path: str, body: dict) -> dict:
    response = await client.post(path, json=body)
    answer = orjson.loads(await response.read())
    assert response.status == 200, answer
    return answer


@pytest.mark.parametrize("field", [
    {"response_format": {"type": "json_schema", "json_schema": {"name": "meeting", "schema": SCHEMA}}},
    {"guided_json": SCHEMA}, {"structured_outputs": {"json": SCHEMA}}], ids=["response-format", "guided", "so"])
async def test_ecma_patterns_constrain_the_answer(stack, field):
    """`\\p{Lu}` and `(?<year>...)` were a 400 "is not a 'regex'": jsonschema checked them with Python's re."""
    client, fake = stack
    fake.script.reply = REPLY
    answer = await _post(client, "/v1/chat/completions", {"messages": USER, "enable_thinking": False, **field})
    assert answer["choices"][0]["message"]["content"] == REPLY
    assert NAME.replace("\\", "\\\\") in fake.script.requests[-1].constraint.grammar


async def test_ecma_patterns_in_a_forced_tool_call(stack):
    client, fake = stack
    fake.script.reply = CALL
    answer = await _post(client, "/v1/chat/completions", {"messages": USER, "tools": [TOOL], "tool_choice": "required"})
    calls = answer["choices"][0]["message"]["tool_calls"]
    assert [orjson.loads(c["function"]["arguments"]) for c in calls] == [{"when": "2026-11", "who": "Émile"}]


@pytest.mark.parametrize("pattern, words", [("[", 'is not a "regex"'), ("(?<=a)b", "look-around")],
                         ids=["no-regex", "not-enforceable"])
async def test_a_pattern_no_engine_reads_is_a_400_naming_it(stack, pattern, words):
    client, _ = stack
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    response = await client.post("/v1/chat/completions", json={"messages": USER, "guided_json": schema})
    error = orjson.loads(await response.read())["error"]
    assert response.status == 400 and error["param"] == "guided_json" and words in error["message"], error


DEEP = "(" * 5000 + "a" + ")" * 5000
DEEP_SCHEMA = {"type": "object", "properties": {"s": {"type": "string", "pattern": DEEP}}}


@pytest.mark.parametrize("path, body, error_of", [
    ("/v1/chat/completions", {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": DEEP_SCHEMA}}}, lambda answer: answer["error"]["message"]),
    ("/api/chat", {"model": "default", "messages": USER, "stream": False, "format": DEEP_SCHEMA},
     lambda answer: answer["error"]),
    ("/v1/messages", {"model": "default", "max_tokens": 4, "messages": USER, "output_config": {"format": {
        "type": "json_schema", "schema": DEEP_SCHEMA}}}, lambda answer: answer["error"]["message"]),
], ids=["openai", "ollama", "anthropic"])
async def test_a_pattern_nested_too_deeply_is_a_400(stack, path, body, error_of):
    """Groups 5000 deep ran re's parser out of stack: a RecursionError, a 500."""
    client, _ = stack
    response = await client.post(path, json=body)
    answer = orjson.loads(await response.read())
    assert response.status == 400, answer
    assert 'is not a "regex" (at $.properties.s.pattern)' in error_of(answer), answer


@pytest.mark.parametrize("pattern", ["abc", "^[a-z]+$", r"^\S+$", "^[^@]+@[^@]+$"])
def test_a_string_whose_pattern_leaves_its_length_open_ends(monkeypatch, pattern):
    """A pattern that leaves the length open (a search, or ^[a-z]+$) was left uncapped: the random tiny model wrote
    such a string until max_tokens (an unfinished string, no JSON). Capped like a plain string."""
    monkeypatch.setenv("SPARKINFER_GRAMMAR_MAX_STRING", "16")
    card, schema = tiny_card(), {"type": "string", "pattern": pattern}
    answers = [random_answer(card, schema, seed, max_tokens=120) for seed in range(12)]
    assert None not in answers
    assert all(len(orjson.loads(a)) <= 16 and re.search(pattern, orjson.loads(a)) for a in answers), answers


@pytest.mark.parametrize("schema,text", [
    ({"type": "string", "pattern": "^a{20}$"}, '"' + "a" * 20 + '"'),
    ({"type": "string", "format": "email", "pattern": "@example\\.com$"}, '"jo@example.com"')],
    ids=["longer-only", "email-pattern"])
def test_a_pattern_no_short_string_is_known_to_match_is_served_uncapped(monkeypatch, schema, text):
    """llguidance finds no string of at most the cap matching ^a{20}$, and cannot tell for an email with a pattern
    (it refused the capped copy: "Unable to determine if regex is empty"): both are served as sent."""
    monkeypatch.setenv("SPARKINFER_GRAMMAR_MAX_STRING", "16")
    card = tiny_card()
    checked(json_grammar(schema, False, card), card, "response_format")
    assert accepts(card, schema, text)
