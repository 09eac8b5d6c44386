"""Validation errors show the values in the JSON the client sent (true, false, null, "x", {"k": 1}), not
jsonschema's Python reprs (True, None, 'x', {'k': 1}), on every route that words them, with what they say kept:
'invalid value for 'tool_choice': True is not of type 'object' nor one of ['none', 'auto', 'required', None]' was the
/v1 answer to tool_choice: true."""
import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
CASES = {
    "chat-kinds": ("/v1/chat/completions", {"messages": USER, "tool_choice": True},
                   'true is not of type "object" nor one of ["none", "auto", "required", null]'),
    "chat-null-item": ("/v1/chat/completions", {"messages": USER, "stop": ["a", None]},
                       'null is not of type "string"'),
    "chat-enum": ("/v1/chat/completions", {"messages": [{"role": "bot", "content": "hi"}]},
                  '"bot" is not one of ["system", "developer", "user", "assistant", "tool"]'),
    "chat-object": ("/v1/chat/completions", {"messages": [{"role": "user", "content": {"a": True}}]},
                    '{"a": true} is not of type "string", "array", "null"'),
    "completions": ("/v1/completions", {"prompt": "hi", "logit_bias": {"1": "x"}},
                    '"x" is not of type "number", "boolean"'),
    "tool-schema": ("/v1/chat/completions", {"messages": USER, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}}]},
        '"strin" is not one of ["array", "boolean", "integer", "null", "number", "object", "string"]'),
    "responses": ("/v1/responses", {"input": "hi", "include": [False]}, "false is not one of ["),
    "messages": ("/v1/messages", {"max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]},
                 '"tool" is not one of ["user", "assistant"'),
    "llama-cpp": ("/completion", {"prompt": "hi", "n_probs": "x"}, '"x" is not of type "integer"'),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_the_message_spells_values_as_json(stack, case):
    client, _ = stack
    path, body, words = case
    response = await client.post(path, data=orjson.dumps({"model": "default", **body}))
    out = orjson.loads(await response.read())
    message = out["error"] if isinstance(out["error"], str) else out["error"]["message"]
    assert response.status == 400 and words in message, message
    assert not any(python in message for python in ("True", "None", "False", "'x'", "'bot'", "'tool'", "'strin'"))
