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
