"""A choice cancelled by id (vLLM's POST /v1/requests/{id}/cancel, SGLang's /abort_request) ends with the text, ids and
logprobs it held back: text that may begin a stop string, an unfinished character. vLLM makes its abort output
finished (vllm/v1/engine/output_processor.py abort_requests: make_request_output(finish_reason=ABORT)), so its
detokenizer gives the text it held, and its token ids were never held.

Measured on make run (tiny model), streamed /v1/chat/completions with return_token_ids and logprobs cancelled
mid-answer: 8 ids and 8 logprobs streamed against usage.completion_tokens 9, 12 against 13 (the last token's bytes
ended inside a character); a held stop-string start was dropped the same way."""
import asyncio

import orjson
import pytest

from proto import pb

REPLY = "Hello world and more"


def _scripted(fake, num_sent: int):
    """The fake's calls send the reply's first `num_sent` tokens, then wait until cancelled."""
    ids = fake.tokenizer.encode(REPLY).ids

    async def messages(request, _ids, _script):
        for i, token_id in enumerate(ids[:num_sent]):
            yield pb.GenerateResponse(token_ids=[token_id], logprobs=[-0.5], num_generated_tokens=i + 1,
                                      num_prompt_tokens=len(request.prompt_token_ids) if i == 0 else 0,
                                      stop_token_id=-1)
        await asyncio.Event().wait()
    fake._messages = messages
    return ids[:num_sent]


async def _decoded(client, count: int) -> None:
    """Waits until the gateway has read `count` tokens of its running choice (llama.cpp's /slots n_decoded)."""
    for _ in range(500):
        slots = await (await client.get("/slots")).json()
        if any(s.get("next_token", [{}])[0].get("n_decoded") == count for s in slots):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the gateway never read {count} tokens")


async def _cancelled_stream(client, fake, body: dict, num_sent: int) -> tuple:
    ids = _scripted(fake, num_sent)
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 50,
            "return_token_ids": True, "logprobs": True, "stream_options": {"include_usage": True}, "chat_template_kwargs": {"enable_thinking": False}, **body}
    task = asyncio.create_task(client.post("/v1/chat/completions", headers={"X-Request-Id": "r1"},
                                           data=orjson.dumps(body)))
    await _decoded(client, num_sent)
    answer = await client.post("/v1/requests/chatcmpl-r1/cancel")
    assert answer.status == 200
    text = (await (await task).read()).decode()
    chunks = [orjson.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    return ids, chunks


@pytest.mark.parametrize("stop", [["Hello there"], ["world peace"]], ids=["first-token", "after-text"])
async def test_a_cancelled_stream_ends_with_the_text_a_stop_string_held(stack, stop):
    client, fake = stack
    num_sent = 1 if stop == ["Hello there"] else 3
    ids, chunks = await _cancelled_stream(client, fake, {"stop": stop}, num_sent)
    choices = [c["choices"][0] for c in chunks if c["choices"]]
    content = "".join(ch["delta"].get("content") or "" for ch in choices)
    assert content == fake.tokenizer.decode(ids)
    assert [i for ch in choices for i in ch.get("token_ids") or []] == ids
    assert len([e for ch in choices for e in (ch.get("logprobs") or {}).get("content") or []]) == num_sent
    assert [ch["finish_reason"] for ch in choices if ch["finish_reason"]] == ["abort"]
    assert chunks[-1]["usage"]["completion_tokens"] == num_sent


async def test_a_cancelled_whole_answer_keeps_the_held_text(stack):
    client, fake = stack
    ids = _scripted(fake, 1)
    task = asyncio.create_task(client.post("/v1/completions", headers={"X-Request-Id": "c1"}, data=orjson.dumps(
        {"prompt": "hi", "max_tokens": 50, "stop": ["Hello there"], "logprobs": 1, "return_token_ids": True})))
    await _decoded(client, 1)
    assert (await client.post("/v1/requests/cmpl-c1/cancel")).status == 200
    body = await (await task).json()
    choice = body["choices"][0]
    assert (choice["text"], choice["token_ids"], choice["finish_reason"]) == (fake.tokenizer.decode(ids), ids, "abort")
    assert len(choice["logprobs"]["tokens"]) == 1 and body["usage"]["completion_tokens"] == 1
