"""A tool whose parameters are no JSON Schema is OpenAI's 400 whatever tool_choice says (fake scheduler). The schema was
checked only where a forced call's grammar needed it, so under tool_choice auto (the default) or none a misspelt type
was rendered into the prompt and answered 200; OpenAI refuses the request: {"message": "Invalid schema for function
'f': ...", "param": "tools[0].function.parameters", "code": "invalid_function_parameters"}."""
import json

import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
BAD = {"type": "object", "properties": {"city": {"type": "strng"}}}
REASON = ('Invalid schema for function \'f\': "strng" is not one of ["array", "boolean", "integer", "null", "number", '
          '"object", "string"] (at $.properties.city.type)')
GOOD = {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}}


def error(param: str) -> dict:
    return {"error": {"message": REASON, "type": "invalid_request_error", "param": param,
                      "code": "invalid_function_parameters"}}


@pytest.mark.parametrize("fields", [
    {},
    {"tool_choice": "auto"},
    {"tool_choice": "none"},
    {"tool_choice": "required"},
    {"tool_choice": {"type": "function", "function": {"name": "g"}}},
    {"stream": True},
], ids=["default", "auto", "none", "required", "named-other", "stream"])
async def test_chat_refuses_parameters_that_are_no_schema(stack, fields):
    client, fake = stack
    tools = [GOOD, {"type": "function", "function": {"name": "f", "parameters": BAD}}]
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, "tools": tools,
                                                                            **fields}))
    assert response.status == 400
    assert await response.json() == error("tools[1].function.parameters")
    assert fake.script.requests == []


async def test_responses_refuses_parameters_that_are_no_schema(stack):
    client, fake = stack
    response = await client.post("/v1/responses", data=orjson.dumps({
        "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": BAD}]}))
    assert response.status == 400
    assert await response.json() == error("tools[0].parameters")
    assert fake.script.requests == []


async def test_a_valid_schema_the_grammar_could_not_enforce_is_fine_unforced(stack):
    """Only a forced call needs the schema as a grammar: unforced, an integer past what constrained decoding writes
    exactly is a valid schema and the request runs."""
    client, fake = stack
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "enum": [2**70]}}}}}]
    response = await client.post("/v1/chat/completions", data=json.dumps(
        {"messages": USER, "tools": tools, "enable_thinking": False}))
    body = await response.json()
    assert response.status == 200 and body["choices"][0]["message"]["content"] == "Hello world"
    assert len(fake.script.requests) == 1
