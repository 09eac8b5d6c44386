"""A refused field's value is quoted shortened in the error (fake scheduler). jsonschema words an error with the whole
repr of the value, so a 200 kB string sent as `messages` came back as a 200 kB error message (up to the 32 MiB body
limit), and a bad value deep in a tool_choice or a response_format schema dumped its whole subtree (vLLM #49239: the
same kind of fault in pydantic's errors made a few-kB request answer 114 MB)."""
import orjson
import pytest

BIG = "a" * 200_000
USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("path, body, param, words", [
    ("/v1/chat/completions", {"messages": BIG}, "messages", 'is not of type "array"'),
    ("/v1/chat/completions", {"messages": USER, "tool_choice": BIG},
     "tool_choice", 'is not one of ["none", "auto", "required", null]'),
    ("/v1/completions", {"prompt": [5, BIG]}, "prompt[1]", 'is not of type "integer"'),
    ("/v1/chat/completions", {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": {"a": {"type": BIG}}}}}},
     "response_format.json_schema.schema", 'is not one of ["array", "boolean", "integer", "null", "number", "object", '
                                           '"string"] (at $.properties.a.type)'),
], ids=["messages", "tool_choice", "prompt", "response_format-schema"])
async def test_openai_errors_quote_a_short_value(stack, path, body, param, words):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps(body))
    raw = await response.read()
    error = orjson.loads(raw)["error"]
    assert response.status == 400 and error["param"] == param and words in error["message"], error["message"][:300]
    assert len(raw) < 1000 and "aaaaaaaaaaaaaaaaaaaaaaaaaaa...aaaaaaaaaaaaaaaaaaaaaaaaaaaa" in error["message"]
    assert fake.script.requests == []


async def test_anthropic_errors_quote_a_short_value(stack):
    client, _ = stack
    response = await client.post("/v1/messages", data=orjson.dumps({"model": "fake-model", "max_tokens": 5,
                                                                     "messages": BIG}))
    raw = await response.read()
    body = orjson.loads(raw)
    assert response.status == 400 and body["type"] == "error" and len(raw) < 1000
    message = body["error"]["message"]
    assert message.startswith('messages: "aaaa') and message.endswith('is not of type "array"')


async def test_a_short_value_is_quoted_whole(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={"messages": "hello"})
    error = (await response.json())["error"]
    assert error["message"] == 'invalid value for \'messages\': "hello" is not of type "array"'
