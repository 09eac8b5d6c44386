"""Cancelling running requests by id (fake scheduler): vLLM's POST /v1/requests/{id}/cancel, DELETE /v1/requests/{id},
POST /v1/requests/cancel and /abort_requests (vllm/entrypoints/serve/cancel/api_router.py), SGLang's POST
/abort_request. The cancelled request ends with finish_reason "abort" and the text it had, as vLLM's engine abort ends
it; all of these routes were a 404, so an RL trainer or a client could not stop a request it had sent."""
import asyncio

import orjson
import pytest

REPLY = " ".join(str(i) for i in range(200))
SLOW_S = 0.02


async def _running(fake, count: int) -> None:
    """Waits until the scheduler has every one of the `count` calls (the box may be slow to start them)."""
    for _ in range(500):
        if len(fake.script.requests) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(fake.script.requests)} of {count} requests reached the scheduler")


async def _lines_until_data(response) -> list:
    lines = []
    while not any(line.startswith(b"data: ") for line in lines):
        lines.append(await response.content.readline())
    return lines


async def _events(response, lines: list) -> list:
    text = b"".join(lines) + await response.read()
    return [line[6:] for line in text.decode().splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("how", ["post", "delete"])
async def test_a_stream_cancelled_by_its_id_ends_with_abort(stack, how):
    client, fake = stack
    fake.script.delay_s = SLOW_S
    response = await client.post("/v1/chat/completions", headers={"X-Request-Id": "r1"}, data=orjson.dumps(
        {"messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 300}))
    lines = await _lines_until_data(response)
    cancel = (client.post("/v1/requests/chatcmpl-r1/cancel") if how == "post"
              else client.delete("/v1/requests/chatcmpl-r1"))
    answer = await cancel
    assert (answer.status, await answer.json()) == (200, {"status": "cancelled", "request_id": "chatcmpl-r1"})
    events = await _events(response, lines)
    assert events[-1] == "[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "abort" and finishes.count("abort") == 1
    assert len(fake.script.requests) == 1


async def test_a_whole_completion_cancelled_in_a_batch_answers_abort(stack):
    client, fake = stack
    fake.script.delay_s = SLOW_S
    task = asyncio.create_task(client.post("/v1/completions", data=orjson.dumps(
        {"prompt": "hi", "max_tokens": 300, "request_id": "c1"})))
    await _running(fake, 1)
    answer = await client.post("/v1/requests/cancel", data=orjson.dumps({"request_ids": ["cmpl-c1", "nope"]}))
    assert await answer.json() == {"status": "cancelled", "cancelled_request_ids": ["cmpl-c1"]}
    body = await (await task).json()
    choice = body["choices"][0]
    assert (body["id"], choice["finish_reason"]) == ("cmpl-c1", "abort")
    assert REPLY.startswith(choice["text"]) and body["usage"]["completion_tokens"] < 300


async def test_an_id_with_nothing_running_is_a_404(stack):
    client, _ = stack
    answer = await client.post("/v1/requests/chatcmpl-nope/cancel")
    assert answer.status == 404
    assert (await answer.json())["error"]["message"] == "Request chatcmpl-nope not found or already completed."
    answer = await client.post("/abort_requests")
    assert await answer.json() == {"status": "cancelled", "cancelled_request_ids": []}


async def test_sglangs_abort_request_ends_a_generate_batch_by_its_rid(stack):
    client, fake = stack
    fake.script.delay_s = SLOW_S
    task = asyncio.create_task(client.post("/generate", data=orjson.dumps(
        {"text": ["a", "b"], "rid": "job", "sampling_params": {"max_new_tokens": 300}})))
    await _running(fake, 2)
    answer = await client.post("/abort_request", data=orjson.dumps({"rid": "job"}))
    assert answer.status == 200 and await answer.read() == b""
    body = await (await task).json()
    assert [item["meta_info"]["finish_reason"]["type"] for item in body] == ["abort", "abort"]
    assert all(REPLY.startswith(item["text"]) and item["meta_info"]["completion_tokens"] < 300 for item in body)


async def test_abort_requests_without_ids_ends_every_request(stack):
    client, fake = stack
    fake.script.delay_s = SLOW_S
    tasks = [asyncio.create_task(client.post("/v1/completions", data=orjson.dumps(
        {"prompt": "hi", "max_tokens": 300, "request_id": f"x{i}"}))) for i in range(2)]
    await _running(fake, 2)
    answer = await client.post("/abort_requests", data=b"")
    assert sorted((await answer.json())["cancelled_request_ids"]) == ["cmpl-x0", "cmpl-x1"]
    for task in tasks:
        assert (await (await task).json())["choices"][0]["finish_reason"] == "abort"


@pytest.mark.parametrize("data", [b"[]", b'["cmpl-x0"]', b"null", b'"cmpl-x0"', b"1"])
async def test_a_cancel_list_body_that_is_no_object_is_a_400_and_cancels_nothing(stack, data):
    """vLLM's POST /v1/requests/cancel reads its body as CancelRequest (a pydantic model: FastAPI's 422 for a JSON
    array, string, number or null); it was a 200 that cancelled nothing, as if the list were empty."""
    client, fake = stack
    fake.script.delay_s = SLOW_S
    task = asyncio.create_task(client.post("/v1/completions", data=orjson.dumps(
        {"prompt": "hi", "max_tokens": 20, "request_id": "x0"})))
    await _running(fake, 1)
    answer = await client.post("/v1/requests/cancel", data=data)
    error = (await answer.json())["error"]
    assert answer.status == 400 and error["message"] == "the request body must be a JSON object", error
    assert (await (await task).json())["choices"][0]["finish_reason"] == "length"


async def test_sglangs_abort_request_matches_a_prefix_only_when_asked(stack):
    client, fake = stack
    fake.script.delay_s = SLOW_S
    tasks = [asyncio.create_task(client.post("/generate", data=orjson.dumps(
        {"text": "a", "rid": rid, "sampling_params": {"max_new_tokens": 300}}))) for rid in ("lora1::a", "lora1::b")]
    await _running(fake, 2)
    await client.post("/abort_request", data=orjson.dumps({"rid": "lora1::"}))
    await asyncio.sleep(0.3)
    assert not any(task.done() for task in tasks)     # no request has that exact rid
    await client.post("/abort_request", data=orjson.dumps({"rid": "lora1::", "prefix": True}))
    for task in tasks:
        assert (await (await task).json())["meta_info"]["finish_reason"]["type"] == "abort"


async def test_text_generation_webuis_stop_generation_ends_the_running_completion(stack):
    """text-generation-webui's POST /v1/internal/stop-generation (extensions/openai/script.py: stop_everything_event,
    then "OK"), which its clients post for a cancel button and raise_for_status on: it was a 404. The running
    /v1/completions request ends "abort" with its text; a SGLang /generate beside it runs on."""
    client, fake = stack
    fake.script.delay_s = SLOW_S
    text = asyncio.create_task(client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "max_tokens": 300})))
    other = asyncio.create_task(client.post("/generate", data=orjson.dumps(
        {"text": "hi", "rid": "keep", "sampling_params": {"max_new_tokens": 30}})))
    await _running(fake, 2)
    answer = await client.post("/v1/internal/stop-generation")
    assert (answer.status, await answer.json()) == (200, "OK")
    text_body = await (await text).json()
    assert text_body["choices"][0]["finish_reason"] == "abort"
    assert REPLY.startswith(text_body["choices"][0]["text"]) and text_body["usage"]["completion_tokens"] < 300
    other_body = await (await other).json()
    assert other_body["meta_info"]["finish_reason"] == {"type": "length", "length": 30}


async def test_text_generation_webuis_stop_generation_ends_none_of_several(stack):
    """text-generation-webui runs one generation at a time (its generation lock) and its stop ends that one; here
    several clients' requests run at once, and one client's cancel button ended every user's completions and chats
    (eac7f4f). With several running, none ends; "OK" all the same."""
    client, fake = stack
    fake.script.delay_s = SLOW_S
    chat = asyncio.create_task(client.post("/v1/chat/completions", data=orjson.dumps(
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 30})))
    text = asyncio.create_task(client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "max_tokens": 30})))
    await _running(fake, 2)
    answer = await client.post("/v1/internal/stop-generation")
    assert (answer.status, await answer.json()) == (200, "OK")
    chat_body, text_body = await (await chat).json(), await (await text).json()
    assert chat_body["choices"][0]["finish_reason"] == "length" and text_body["choices"][0]["finish_reason"] == "length"
    assert text_body["usage"]["completion_tokens"] == 30
