"""An empty tools (or legacy functions) list on /v1/chat/completions is OpenAI's 400 "[] is too short - 'tools'" (vLLM
refuses it too, since its check_tool_usage); it was taken as no tools. The Responses API, Anthropic's Messages and
LM Studio's /api/v0 take an empty list as no tools (fake scheduler)."""
import pytest

USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("field", ["tools", "functions"])
async def test_empty_list_is_a_400(stack, field, stream):
    client, fake = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, field: [], "stream": stream})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == field and error["code"] == "empty_array"
    assert error["message"].startswith(f"[] is too short - '{field}'"), error
    assert fake.script.requests == []


async def test_empty_messages_in_the_same_words(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={"messages": []})
    error = (await response.json())["error"]
    assert response.status == 400 and error["message"].startswith("[] is too short - 'messages'")
    assert error["param"] == "messages" and error["code"] == "empty_array"


@pytest.mark.parametrize("path, body", [
    ("/api/v0/chat/completions", {"messages": USER, "tools": []}),
    ("/v1/responses", {"input": "hi", "tools": []}),
    ("/v1/messages", {"model": "fake-model", "max_tokens": 8, "messages": USER, "tools": []}),
    ("/v1/tokenize", {"messages": USER, "tools": []}),
], ids=["lmstudio", "responses", "anthropic", "tokenize"])
async def test_other_routes_take_it_as_no_tools(stack, path, body):
    client, _ = stack
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    answer = await response.json()
    assert answer.get("error") is None and answer.get("type") != "error"


async def test_an_empty_prompt_list_in_the_same_words(stack):
    """prompt: [] fits none of the prompt's forms only for its length: it was 'invalid value for prompt: [] is not
    valid under any of the given schemas' (code invalid_type), as if its type were wrong."""
    client, fake = stack
    response = await client.post("/v1/completions", json={"prompt": []})
    error = (await response.json())["error"]
    assert response.status == 400 and error["message"].startswith("[] is too short - 'prompt'")
    assert error["param"] == "prompt" and error["code"] == "empty_array" and fake.script.requests == []
