"""min_tokens above the explicit output limit is a 400 that names the limit the request set (fake scheduler): it
always said max_tokens, also when max_completion_tokens (which wins over max_tokens) gave the limit, and on the
Responses API, which has no max_tokens field (its max_output_tokens is the chat route's max_completion_tokens)."""
import pytest

USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("path, body, words", [
    ("/v1/chat/completions", {"messages": USER, "min_tokens": 10, "max_completion_tokens": 5, "max_tokens": 20},
     "min_tokens (10) must be at most max_completion_tokens (5)"),
    ("/v1/chat/completions", {"messages": USER, "min_tokens": 10, "max_tokens": 5},
     "min_tokens (10) must be at most max_tokens (5)"),
    ("/v1/responses", {"input": "hi", "min_tokens": 10, "max_output_tokens": 5},
     "min_tokens (10) must be at most max_output_tokens (5)"),
], ids=["max_completion_tokens", "max_tokens", "responses"])
async def test_the_limit_that_counts_is_named(stack, path, body, words):
    client, fake = stack
    response = await client.post(path, json=body)
    error = (await response.json())["error"]
    assert response.status == 400 and error["message"] == words and error["param"] == "min_tokens"
    assert fake.script.requests == []


async def test_min_tokens_under_max_completion_tokens_passes(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, "min_tokens": 10,
                                                                 "max_completion_tokens": 20, "max_tokens": 5})
    assert response.status == 200 and (await response.json())["object"] == "chat.completion"


@pytest.mark.parametrize("extra", [{"max_completion_tokens": 2}, {"max_completion_tokens": 0},
                                   {"max_completion_tokens": -1}], ids=["below", "zero", "negative"])
async def test_completions_ignore_the_chat_only_max_completion_tokens(stack, extra):
    """/v1/completions has no max_completion_tokens (vLLM's CompletionRequest and OpenAI's completions API have only
    max_tokens): it limits nothing there, and min_tokens is checked against max_tokens. It was read as on chat, so a
    min_tokens within max_tokens was refused as 'must be at most max_completion_tokens'."""
    client, fake = stack
    response = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 5, "min_tokens": 3, **extra})
    body = await response.json()
    assert response.status == 200, body
    assert body["object"] == "text_completion" and body["choices"][0]["text"] == "Hello world"
    assert fake.script.requests[-1].sampling.min_tokens == 3 and fake.script.requests[-1].max_tokens == 5
    response = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2, "min_tokens": 3, **extra})
    error = (await response.json())["error"]
    assert response.status == 400 and error["message"] == "min_tokens (3) must be at most max_tokens (2)"
