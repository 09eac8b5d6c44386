"""LM Studio's output limit is a cap: max_tokens (/api/v0) or max_output_tokens (/api/v1/chat) past the room the
prompt leaves runs until the context is full, finish_reason "length" and LM Studio's stop reason
contextLengthReached, instead of vLLM's 400 context_length_exceeded, which /v1 keeps (fake scheduler, context
2048). LM Studio's maxTokens is the "number of tokens to predict at most", and a generation that reaches the context
window stops with stopReason contextLengthReached (its LLMPredictionConfigInput maxTokens / contextOverflowPolicy)."""
import json

import pytest

REPLY = "1, " * 3000
USER = [{"role": "user", "content": "hi"}]
PAST = 10 ** 6


def _sse(text: str) -> list:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("path, body", [
    ("/api/v0/chat/completions", {"messages": USER, "enable_thinking": False}),
    ("/api/v0/completions", {"prompt": "hi"}),
], ids=["chat", "completions"])
async def test_max_tokens_past_the_context_runs_until_it_is_full(stack, path, body, stream):
    client, fake = stack
    # A stream's stats come in the usage chunk, which it gets when it asks for it.
    usage = {"stream_options": {"include_usage": True}} if stream else {}
    response = await client.post(path, json={"model": "fake-model", **body, "max_tokens": PAST, "stream": stream,
                                              **usage})
    assert response.status == 200, await response.text()
    room = 2048 - len(fake.script.requests[-1].prompt_token_ids)
    assert fake.script.requests[-1].max_tokens == room
    if stream:
        chunks = _sse(await response.text())
        finish = [c["finish_reason"] for chunk in chunks for c in chunk["choices"] if c["finish_reason"]]
        answer = chunks[-1]
    else:
        answer = await response.json()
        finish = [answer["choices"][0]["finish_reason"]]
    assert finish == ["length"]
    assert (answer["usage"]["completion_tokens"], answer["stats"]["stop_reason"]) == (room, "contextLengthReached")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_max_output_tokens_past_the_context_runs_until_it_is_full(stack, stream):
    client, fake = stack
    body = {"model": "fake-model", "input": "hi", "reasoning": "off", "max_output_tokens": PAST, "stream": stream}
    response = await client.post("/api/v1/chat", json=body)
    assert response.status == 200, await response.text()
    room = 2048 - len(fake.script.requests[-1].prompt_token_ids)
    assert fake.script.requests[-1].max_tokens == room
    answer = _sse(await response.text())[-1]["result"] if stream else await response.json()
    assert answer["stats"]["total_output_tokens"] == room
    assert answer["output"][-1]["content"] == fake.tokenizer.decode(fake.tokenizer.encode(REPLY).ids[:room])


async def test_v1_keeps_vllms_400(stack):
    client, fake = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, "max_tokens": PAST})
    error = (await response.json())["error"]
    assert (response.status, error["code"], error["param"]) == (400, "context_length_exceeded", "max_tokens")
    assert fake.script.requests == []
