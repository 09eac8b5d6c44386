"""Unit tests: a forced call's string parameter whose anchored pattern no string within its length bounds matches is
a 400 naming it before the request starts (the call grammar compiled, and the worker failed the request mid-way)."""

import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]


def _tool(code: dict) -> dict:
    return {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"code": code}, "required": ["code"]}}}


EXPECTED = {"error": {"message": "tools: a string parameter ('code' of 'lookup') has a pattern that no string within "
                                 "its length bounds matches, so no call can satisfy it",
                      "type": "invalid_request_error", "param": "tools", "code": "unsupported_schema"}}


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "lookup"}}],
                         ids=["required", "named"])
async def test_a_pattern_no_string_of_its_length_matches_is_a_400(stack, choice):
    client, fake = stack
    before = len(fake.script.requests)
    body = {"messages": USER, "tools": [_tool({"type": "string", "pattern": "^[A-Z]{10}$", "maxLength": 5})],
            "tool_choice": choice}
    response = await client.post("/v1/chat/completions", json=body)
    assert (response.status, orjson.loads(await response.read())) == (400, EXPECTED)
    assert len(fake.script.requests) == before


async def test_a_pattern_its_length_allows_is_served(stack):
    client, fake = stack
    fake.script.reply = ("<tool_call>\n<function=lookup>\n<parameter=code>\nABC\n</parameter>\n</function>\n"
                         "</tool_call>")
    body = {"messages": USER, "tools": [_tool({"type": "string", "pattern": "^[A-Z]{3}$", "maxLength": 5})],
            "tool_choice": "required"}
    response = await client.post("/v1/chat/completions", json=body)
    calls = orjson.loads(await response.read())["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ['{"code":"ABC"}']
