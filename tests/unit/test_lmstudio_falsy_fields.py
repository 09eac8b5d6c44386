"""Gateway with the fake scheduler over loopback: LM Studio fields whose falsy value of the wrong type was read as
"none" (/api/v0 tools, /api/v1 integrations) are a 400 in its OpenAI-shaped error object."""
import pytest


HI = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize("path, body, error", [
    ("/api/v0/chat/completions", {"messages": HI, "tools": 0},
     {"message": 'invalid value for \'tools\': 0 is not of type "array", "null"', "type": "invalid_request_error",
      "param": "tools", "code": "invalid_type"}),
    ("/api/v0/chat/completions", {"messages": HI, "tools": ""},
     {"message": 'invalid value for \'tools\': "" is not of type "array", "null"', "type": "invalid_request_error",
      "param": "tools", "code": "invalid_type"}),
    ("/api/v1/chat", {"input": "Hi", "integrations": 0},
     {"message": '"integrations" must be an array', "type": "invalid_request", "param": "integrations",
      "code": "invalid_value"}),
    ("/api/v1/chat", {"input": "Hi", "integrations": ""},
     {"message": '"integrations" must be an array', "type": "invalid_request", "param": "integrations",
      "code": "invalid_value"}),
], ids=["v0 tools zero", "v0 tools empty string", "v1 integrations zero", "v1 integrations empty string"])
async def test_a_falsy_value_of_the_wrong_type_is_a_400(fake, path, body, error):
    """LM Studio reads an empty or absent list as none; a 0 or "" there was taken as none too (a 200 that ignored
    what the client sent). LM Studio documents both as arrays (lmstudio-ai/docs 1_developer/2_rest/chat.md:
    integrations `array<string | object>`; endpoints.md /api/v0/chat/completions takes OpenAI's tools array)."""
    client, servicer = fake
    servicer.script.reply = "Hello"
    response = await client.post(path, json={"model": "fake-model", **body})
    assert response.status == 400 and await response.json() == {"error": error}
    assert servicer.script.requests == []


@pytest.mark.parametrize("path, body", [
    ("/api/v0/chat/completions", {"messages": HI, "tools": [], "tool_choice": "auto"}),
    ("/api/v0/chat/completions", {"messages": HI, "tools": None}),
    ("/api/v1/chat", {"input": "Hi", "integrations": []}),
    ("/api/v1/chat", {"input": "Hi", "integrations": None}),
], ids=["v0 empty tools", "v0 null tools", "v1 empty integrations", "v1 null integrations"])
async def test_an_empty_or_null_list_is_still_none(fake, path, body):
    client, servicer = fake
    servicer.script.reply = "Hello"
    response = await client.post(path, json={"model": "fake-model", **body})
    assert response.status == 200 and servicer.script.requests
