"""Unit tests: a required name that `properties` do not list is still a valid, satisfiable JSON Schema (an additional
property): the grammar copy closed the object to its properties and so refused the schema with a 400."""

import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city", "zip"]}
REPLY = '{"city": "Paris", "zip": "75001"}'


@pytest.mark.parametrize("field", [
    {"response_format": {"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA}}},
    {"guided_json": SCHEMA}], ids=["response-format", "guided-json"])
async def test_a_required_name_outside_properties_is_served(stack, field):
    client, fake = stack
    fake.script.reply = REPLY
    response = await client.post("/v1/chat/completions", json={"messages": USER, "enable_thinking": False, **field})
    answer = orjson.loads(await response.read())
    assert response.status == 200, answer
    assert answer["choices"][0]["message"]["content"] == REPLY
    assert '"zip": {}' in fake.script.requests[-1].constraint.grammar
