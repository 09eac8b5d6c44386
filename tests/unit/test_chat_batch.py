"""vLLM's /v1/chat/completions/batch (fake scheduler): one chat.completion whose choice i answers conversation i as
the chat route answers it alone, the usage summed; what a batch cannot do is a 400 naming it; all admitted or none."""
import asyncio

import orjson
import pytest

REPLY = "Hello world, this is a test."
FIRST = [{"role": "user", "content": "hi"}]
SECOND = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]
FIELDS = {"model": "default", "enable_thinking": False, "max_tokens": 64, "logprobs": True}


async def _post(client, path: str, body: dict, headers: dict = None) -> tuple:
    response = await client.post(path, data=orjson.dumps(body), headers=headers or {})
    return response.status, orjson.loads(await response.read())


async def test_each_conversation_is_answered_as_the_chat_route_answers_it(stack):
    client, fake = stack
    status, batch = await _post(client, "/v1/chat/completions/batch", {**FIELDS, "messages": [FIRST, SECOND]},
                                {"X-Request-Id": "batch-7"})
    assert status == 200, batch
    batch_prompts = [list(request.prompt_token_ids) for request in fake.script.requests]
    alone = []
    for conversation in (FIRST, SECOND):
        status, answer = await _post(client, "/v1/chat/completions", {**FIELDS, "messages": conversation})
        assert status == 200
        alone.append(answer)
    assert sorted(batch_prompts) == sorted(list(r.prompt_token_ids) for r in fake.script.requests[-2:])
    assert batch["id"] == "chatcmpl-batch-7" and batch["object"] == "chat.completion"
    assert [choice["index"] for choice in batch["choices"]] == [0, 1]
    for choice, answer in zip(batch["choices"], alone):
        assert {**choice, "index": 0} == answer["choices"][0]
    assert batch["choices"][0]["message"]["content"] == REPLY
    prompt_tokens = [answer["usage"]["prompt_tokens"] for answer in alone]
    assert prompt_tokens[0] != prompt_tokens[1]
    assert batch["usage"]["prompt_tokens"] == sum(prompt_tokens)
    assert batch["usage"]["completion_tokens"] == sum(answer["usage"]["completion_tokens"] for answer in alone)
    assert batch["usage"]["total_tokens"] == sum(answer["usage"]["total_tokens"] for answer in alone)
    assert batch["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}


@pytest.mark.parametrize("body, param, words", [
    ({"messages": FIRST}, "messages[0]", "must be a non-empty list of messages"),
    ({"messages": []}, "messages", "non-empty list of conversations"),
    ({"messages": [FIRST, []]}, "messages[1]", "must be a non-empty list of messages"),
    ({"messages": [FIRST] * 2049}, "messages", "at most 2048"),
    ({"messages": [FIRST], "stream": True}, "stream", "do not support streaming"),
    ({"messages": [FIRST], "stream": "true"}, "stream", "do not support streaming"),
    ({"messages": [FIRST], "n": 2}, "n", "do not support `n > 1`"),
    ({"messages": [FIRST], "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "tool use"),
    ({"messages": [FIRST], "tool_choice": "auto"}, "tool_choice", "tool use"),
    ({"messages": [FIRST], "prompt_logprobs": 1}, "prompt_logprobs", "prompt_logprobs"),
    ({"messages": [FIRST, [{"role": "wizard", "content": "x"}]]}, "messages[1][0].role", "'messages[1][0].role'"),
    ({"messages": [FIRST, [{"role": "user", "content": "hello " * 3000}]]}, "messages[1]", "maximum context length"),
], ids=["flat-list", "empty", "empty-conversation", "too-many", "stream", "stream-text", "n", "tools",
        "tool-choice", "prompt-logprobs", "bad-role-in-second", "second-too-long"])
async def test_what_a_batch_cannot_do_is_a_400_naming_it(stack, body, param, words):
    client, fake = stack
    status, answer = await _post(client, "/v1/chat/completions/batch", {"model": "default", **body})
    assert status == 400, answer
    assert answer["error"]["param"] == param and words in answer["error"]["message"]
    assert not fake.script.requests


async def test_one_refused_conversation_is_one_429_and_leaves_nothing(stack):
    client, fake = stack
    # 50 ms a token: the first two are still running when the third arrives.
    fake.script.max_running, fake.script.delay_s = 2, 0.05
    status, answer = await _post(client, "/v1/chat/completions/batch",
                                 {**FIELDS, "messages": [FIRST, SECOND, FIRST], "max_tokens": 400, "ignore_eos": True})
    assert status == 429 and answer["error"]["code"] == "server_overloaded"
    for _ in range(100):
        if fake.num_running == 0:
            break
        await asyncio.sleep(0.01)
    assert fake.num_running == 0
