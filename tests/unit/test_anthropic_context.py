"""Gateway over the fake scheduler (context 2048): a request that does not fit the context is Anthropic's 400 in
Anthropic's words, which clients parse: Claude Code retries with a smaller max_tokens from 'input length and
`max_tokens` exceed context limit: I + O > N' and compacts the conversation on 'prompt is too long: N tokens > M'."""
import pytest

USER = [{"role": "user", "content": "Hi"}]
BASE = {"model": "fake-model", "max_tokens": 16, "messages": USER, "thinking": {"type": "disabled"}}


async def error_message(response) -> str:
    assert response.status == 400, await response.text()
    body = await response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body
    return body["error"]["message"]


async def num_tokens(client, body: dict) -> int:
    response = await client.post("/v1/messages/count_tokens", json=body)
    return (await response.json())["input_tokens"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_max_tokens_past_the_room(stack, stream):
    client, fake = stack
    num_prompt = await num_tokens(client, {"model": "fake-model", "messages": USER, "thinking": {"type": "disabled"}})
    response = await client.post("/v1/messages", json={**BASE, "max_tokens": 32000, "stream": stream})
    assert await error_message(response) == (
        f"input length and `max_tokens` exceed context limit: {num_prompt} + 32000 > 2048, decrease input length "
        f"or `max_tokens` and try again")
    assert fake.script.requests == []


async def test_prompt_past_the_context(stack):
    client, _ = stack
    # "word " is one token of the fake tokenizer: 3000 of them are past the context.
    body = {**BASE, "messages": [{"role": "user", "content": "word " * 3000}]}
    message = await error_message(await client.post("/v1/messages", json=body))
    # count_tokens counts it all the same, as Anthropic does: clients ask it to learn that a prompt no longer fits.
    counted = await client.post("/v1/messages/count_tokens", json=body)
    assert counted.status == 200, await counted.text()
    num_prompt = (await counted.json())["input_tokens"]
    assert num_prompt > 3000 and message == f"prompt is too long: {num_prompt} tokens > 2048 maximum"


async def test_prompt_past_the_context_by_size_or_message_count(stack):
    client, _ = stack
    huge = {**BASE, "messages": [{"role": "user", "content": "x" * 200_000}]}
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        # Refused for its size alone, before tokenizing (count_tokens too: no exact count was made).
        message = await error_message(await client.post(path, json=huge))
        assert message.startswith("prompt is too long: ") and " tokens > 2048 maximum (a lower bound" in message
    many = {**BASE, "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}] * 1100}
    message = await error_message(await client.post("/v1/messages", json=many))
    assert message == "prompt is too long: 2200 tokens > 2048 maximum (a lower bound, counted before tokenizing)"


async def test_other_routes_keep_openai_words(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, "max_tokens": 32000})
    assert "This model's maximum context length is 2048 tokens" in (await response.json())["error"]["message"]
