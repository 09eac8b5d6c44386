"""Gateway with the fake scheduler: max_tokens -1 on /v1 is llama.cpp's and LM Studio's "no limit" (up to the context),
as llama-server reads max_tokens as n_predict and LM Studio's own curl example sends it to /v1/chat/completions;
it was vLLM's 400 'max_tokens must be at least 1, got -1'."""
import pytest

CONTEXT = 2048    # the `stack` fixture's window
CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "Say hello."}]}
COMPLETION = {"model": "fake-model", "prompt": "Say hello."}


@pytest.mark.parametrize("path,body,field", [
    ("/v1/chat/completions", CHAT, "max_tokens"),
    ("/v1/chat/completions", CHAT, "max_completion_tokens"),
    ("/v1/completions", COMPLETION, "max_tokens"),
], ids=["chat max_tokens", "chat max_completion_tokens", "completions max_tokens"])
async def test_minus_one_is_no_limit_up_to_the_context(stack, path, body, field):
    client, fake = stack
    response = await client.post(path, json={**body, field: -1})
    answer = await response.json()
    assert response.status == 200, answer
    sent = fake.script.requests[-1]
    assert sent.max_tokens == CONTEXT - len(sent.prompt_token_ids)
    assert answer["usage"]["prompt_tokens"] == len(sent.prompt_token_ids)


async def test_other_negative_limits_are_still_refused(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={**CHAT, "max_tokens": -3})
    assert response.status == 400
    assert (await response.json())["error"]["message"] == "max_tokens must be at least 1, got -3"
