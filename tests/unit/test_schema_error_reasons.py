"""A /v1 400 for a value that matches none of a field's forms says why (fake scheduler). jsonschema stops at the anyOf
("[1] is not valid under any of the given schemas") where its alternatives tie, so a stop list holding a number, a
prompt with one bad token id or a schema with a misspelt type came back with no reason and no place. Here the reason is
the one inside the alternative of the value's own kind, at its place (the `param` OpenAI's errors set), as pydantic
words vLLM's ("stop.list[str].0: Input should be a valid string")."""
import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
ENUM_TYPES = '["array", "boolean", "integer", "null", "number", "object", "string"]'


@pytest.mark.parametrize("path, fields, error", [
    ("/v1/chat/completions", {"stop": [1]},
     ("stop[0]", "invalid_type", 'invalid value for \'stop[0]\': 1 is not of type "string"')),
    ("/v1/chat/completions", {"stop": 5},
     ("stop", "invalid_type", 'invalid value for \'stop\': 5 is not of type "string", "null", "array"')),
    ("/v1/chat/completions", {"tool_choice": "maybe"},
     ("tool_choice", "invalid_value",
      'invalid value for \'tool_choice\': "maybe" is not one of ["none", "auto", "required", null]')),
    ("/v1/chat/completions", {"tool_choice": {"type": "function", "function": {"name": 5}}},
     ("tool_choice.function.name", "invalid_type",
      'invalid value for \'tool_choice.function.name\': 5 is not of type "string"')),
    ("/v1/chat/completions", {"tool_choice": {"type": "function", "function": {}}},
     ("tool_choice.function.name", "missing_required_parameter", "'tool_choice.function.name' is a required property")),
    ("/v1/chat/completions", {"tool_choice": {"type": "function", "name": "f"}},
     ("tool_choice.function", "missing_required_parameter", "'tool_choice.function' is a required property")),
    ("/v1/chat/completions", {"tool_choice": 5},
     ("tool_choice", "invalid_type", 'invalid value for \'tool_choice\': 5 is not of type "object" nor one of ["none", '
                                     '"auto", "required", null]')),
    ("/v1/completions", {"prompt": [1, "a"]},
     ("prompt[1]", "invalid_type", 'invalid value for \'prompt[1]\': "a" is not of type "integer"')),
    ("/v1/completions", {"prompt": [[1, -2]]},
     ("prompt[0][1]", "invalid_value", "invalid value for 'prompt[0][1]': -2 is less than the minimum of 0")),
    ("/v1/completions", {"prompt": [[1], []]},
     ("prompt[1]", "empty_array", "[] is too short - 'prompt[1]': send at least one item (an optional list can be left "
                                  "out)")),
    ("/v1/completions", {"prompt": {"a": 1}},
     ("prompt", "invalid_type", 'invalid value for \'prompt\': {"a": 1} is not of type "string", "array"')),
    ("/v1/responses", {"tool_choice": "maybe"},
     ("tool_choice", "invalid_value", 'invalid value for \'tool_choice\': "maybe" is not one of ["none", "auto", '
                                      '"required", null]')),
], ids=["stop-item", "stop-kind", "tool_choice-word", "tool_choice-name", "tool_choice-no-name", "tool_choice-flat",
        "tool_choice-kind", "prompt-token",
        "prompt-nested-token", "prompt-empty-item", "prompt-kind", "responses-tool_choice"])
async def test_body_errors_give_the_reason_and_place(stack, path, fields, error):
    client, fake = stack
    base = {"input": "hi"} if path == "/v1/responses" else {"prompt": "hi"} if path == "/v1/completions" else {
        "messages": USER, "tools": [{"type": "function", "function": {"name": "f"}}]}
    response = await client.post(path, data=orjson.dumps({**base, **fields}))
    body = await response.json()
    assert response.status == 400
    assert body == {"error": {"message": error[2], "type": "invalid_request_error", "param": error[0],
                              "code": error[1]}}
    assert fake.script.requests == []


@pytest.mark.parametrize("fields, param, reason", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"a": {"type": "strng"}}}}}},
     "response_format.json_schema.schema", f'"strng" is not one of {ENUM_TYPES} (at $.properties.a.type)'),
    ({"guided_json": {"type": "object", "properties": {"a": {"type": ["string", "nul"]}}}},
     "guided_json", f'"nul" is not one of {ENUM_TYPES} (at $.properties.a.type[1])'),
    ({"structured_outputs": {"json": {"type": "strng"}}},
     "structured_outputs.json", f'"strng" is not one of {ENUM_TYPES} (at $.type)'),
    ({"guided_json": {"type": "object", "required": "a"}}, "guided_json", '"a" is not of type "array" (at $.required)'),
], ids=["response_format", "guided_json-type-list", "structured_outputs", "guided_json-required"])
async def test_schema_errors_give_the_reason_and_place(stack, fields, param, reason):
    client, fake = stack
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, **fields}))
    body = await response.json()
    assert response.status == 400
    assert body["error"] == {"message": f"{param} is not a valid JSON Schema: {reason}",
                             "type": "invalid_request_error", "param": param, "code": "invalid_value"}
    assert fake.script.requests == []


BAD_DRAFT = {"$schema": 5, "type": "object"}
SHAPES = {"openai": lambda body: body["error"]["message"], "ollama": lambda body: body["error"],
          "anthropic": lambda body: body["type"] == "error" and body["error"]["message"],
          "llama.cpp": lambda body: body["error"]["code"] == 400 and body["error"]["message"]}


@pytest.mark.parametrize("path, fields, shape", [
    ("/v1/chat/completions", {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": BAD_DRAFT}}}, "openai"),
    ("/v1/chat/completions", {"messages": USER, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": BAD_DRAFT}}]}, "openai"),
    ("/v1/completions", {"prompt": "hi", "guided_json": BAD_DRAFT}, "openai"),
    ("/v1/responses", {"input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": BAD_DRAFT}}},
     "openai"),
    ("/v1/messages", {"model": "default", "max_tokens": 4, "messages": USER, "output_config": {"format": {
        "type": "json_schema", "schema": BAD_DRAFT}}}, "anthropic"),
    ("/v1/messages", {"model": "default", "max_tokens": 4, "messages": USER, "tools": [{"name": "f", "input_schema": BAD_DRAFT}]},
     "anthropic"),
    ("/api/chat", {"model": "default", "messages": USER, "format": BAD_DRAFT}, "ollama"),
    ("/api/generate", {"model": "default", "prompt": "hi", "format": BAD_DRAFT}, "ollama"),
    ("/completion", {"prompt": "hi", "json_schema": BAD_DRAFT}, "llama.cpp"),
], ids=["response_format", "tools", "guided_json", "responses", "anthropic-format", "anthropic-tools", "ollama-chat",
        "ollama-generate", "llama.cpp"])
async def test_a_schema_whose_draft_is_no_string_is_a_400(stack, path, fields, shape):
    """{"$schema": 5} was a 500 on every surface (jsonschema's draft lookup: AttributeError 'int' object has no
    attribute 'decode'); it is the meta-schema's reason, in the route's own error shape."""
    client, fake = stack
    response = await client.post(path, data=orjson.dumps(fields))
    body = await response.json()
    assert response.status == 400, body
    assert '5 is not of type "string"' in SHAPES[shape](body), body
    assert fake.script.requests == []


ONE_OF_OBJECTS = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                            {"type": "object", "properties": {"b": {"type": "integer"}}}]}
ONE_OF_REASON = ("oneOf whose branches one value could match together is not supported (it cannot be enforced that "
                 "exactly one matches); anyOf is")


@pytest.mark.parametrize("path, body, message", [
    ("/v1/chat/completions", {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}}}},
     'response_format cannot be enforced by constrained decoding: Unimplemented keys: ["uniqueItems"]'),
    ("/v1/chat/completions", {"messages": USER, "guided_json": ONE_OF_OBJECTS},
     f"guided_json cannot be enforced by constrained decoding: {ONE_OF_REASON}"),
    ("/api/chat", {"model": "fake-model", "stream": False, "messages": USER,
                   "format": {"type": "string", "pattern": "^(?=x)x+$"}},
     "format cannot be enforced by constrained decoding: regex parse error:\n    ^(?=x)x+$\n     ^^^\nerror: "
     "look-around, including look-ahead and look-behind, is not supported"),
], ids=["unique-items", "overlapping-one-of", "ollama-format"])
async def test_a_schema_llguidance_refuses_is_a_400_with_its_reason_alone(stack, path, body, message):
    """The reason came with llguidance's place and excerpt of the grammar copy (`1 | start: %json{... "x-guidance":
    ...}` and a caret: keys the client never sent) and, for oneOf, "Enable 'coerce_one_of' option", which no request
    can set."""
    client, _ = stack
    response = await client.post(path, json=body)
    assert response.status == 400
    got = orjson.loads(await response.read())
    assert (got["error"]["message"] if path.startswith("/v1") else got["error"]) == message
