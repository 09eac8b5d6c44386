"""vLLM's whitespace pattern for guided JSON (guided_whitespace_pattern, structured_outputs.whitespace_pattern) is
taken and changes nothing: JSON is always written compact here, and vLLM's default xgrammar backend reads neither
(vllm#26362, 'whitespace_pattern not doing anything'). Both were 400 unsupported, so a client that sends
{"guided_json": schema, "guided_whitespace_pattern": " "} (a LlamaIndex extractor does) got no JSON (fake scheduler)."""
import pytest

from tests.unit.test_gateway_fields import BASE, post

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize("plain, with_pattern", [
    ({"guided_json": SCHEMA}, {"guided_json": SCHEMA, "guided_whitespace_pattern": " "}),
    ({"guided_json": SCHEMA}, {"guided_json": SCHEMA, "guided_whitespace_pattern": "[\\n ]*"}),
    ({"structured_outputs": {"json": SCHEMA}}, {"structured_outputs": {"json": SCHEMA, "whitespace_pattern": "\\s*"}}),
], ids=["guided-space", "guided-newlines", "structured"])
async def test_a_whitespace_pattern_is_served_with_the_same_json_grammar(stack, plain, with_pattern):
    client, fake = stack
    status, body = await post(client, {**BASE, **plain})
    assert status == 200, body
    grammar = fake.script.requests[-1].constraint.grammar
    status, body = await post(client, {**BASE, **with_pattern})
    assert status == 200, body
    assert grammar.startswith("start: %json{") and fake.script.requests[-1].constraint.grammar == grammar


async def test_a_whitespace_pattern_that_is_no_string_is_still_a_400(stack):
    client, fake = stack
    status, body = await post(client, {**BASE, "guided_json": SCHEMA, "guided_whitespace_pattern": 3})
    assert status == 400 and body["error"]["param"] == "guided_whitespace_pattern", body
    assert not fake.script.requests
