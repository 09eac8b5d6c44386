"""echo asks for the prompt's logprobs as vLLM's to_sampling_params does when prompt_logprobs is not sent (chat: at
top_logprobs, 0 unless sent; completions: at logprobs), and the non-streamed answer carries them as vLLM's
prompt_logprobs: beside the choices on chat (vllm#27477 reads them there for the prompt's exact ids), in each choice
on completions (its request_output_to_completion_response). Neither was answered (fake scheduler)."""
import orjson
import pytest

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


async def post(client, path, body):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


def _positions(fake, prompt_logprobs) -> tuple:
    """(the prompt ids the scheduler saw, the ids the answer's prompt_logprobs scores at each position)."""
    prompt_ids = list(fake.script.requests[-1].prompt_token_ids)
    return prompt_ids, [None] + [int(next(iter(position))) for position in prompt_logprobs[1:]]


@pytest.mark.parametrize("extra, alternatives", [({}, 0), ({"logprobs": True}, 0),
                                                 ({"logprobs": True, "top_logprobs": 2}, 2)],
                         ids=["echo", "logprobs", "top-2"])
async def test_chat_echo_returns_the_prompt_logprobs(stack, extra, alternatives):
    client, fake = stack
    status, body = await post(client, "/v1/chat/completions", {**CHAT, "echo": True, **extra})
    assert status == 200, body
    assert fake.script.requests[-1].sampling.num_prompt_logprobs == alternatives
    prompt_ids, scored = _positions(fake, body["prompt_logprobs"])
    assert scored == [None] + prompt_ids[1:]
    # each position: the prompt token first, then the scheduler's `alternatives` most likely (ids 0.. in the fake)
    assert all({int(key) for key in position} == {token_id, *range(alternatives)}
               for token_id, position in zip(prompt_ids[1:], body["prompt_logprobs"][1:]))


async def test_completions_echo_with_logprobs_returns_the_prompt_logprobs_per_choice(stack):
    client, fake = stack
    status, body = await post(client, "/v1/completions", {"prompt": "hello there", "max_tokens": 2, "echo": True,
                                                          "logprobs": 1, "n": 2})
    assert status == 200, body
    prompt_ids = list(fake.script.requests[-1].prompt_token_ids)
    for choice in body["choices"]:
        assert [None] + [int(next(iter(p))) for p in choice["prompt_logprobs"][1:]] == [None] + prompt_ids[1:]
        # the legacy block still covers the prompt first, as before
        assert choice["logprobs"]["token_logprobs"][0] is None


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {**CHAT, "stream": True, "echo": True}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2, "echo": True}),
    ("/v1/chat/completions", CHAT),
], ids=["chat-stream", "completions-without-logprobs", "chat-without-echo"])
async def test_no_prompt_logprobs_where_vllm_asks_for_none(stack, path, body):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200
    assert b"prompt_logprobs" not in await response.read()
    assert not fake.script.requests[-1].sampling.prompt_logprobs


async def test_a_batch_with_echo_computes_no_prompt_logprobs(stack):
    client, fake = stack
    status, body = await post(client, "/v1/chat/completions/batch",
                              {"messages": [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]],
                               "max_tokens": 2, "echo": True})
    assert status == 200, body
    assert "prompt_logprobs" not in body
    assert not any(request.sampling.prompt_logprobs for request in fake.script.requests)
