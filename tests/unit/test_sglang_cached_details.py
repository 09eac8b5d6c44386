"""SGLang's return_cached_tokens_details on /v1 chat and completions (fake scheduler): sglext.cached_tokens_details
beside the choices, and on a stream a chunk of its own with no choices, after the finish chunks and before the usage
chunk, as SGLang's serving_chat / serving_completions send it and its bench_serving --cache-report reads it."""
import orjson
import pytest

CHAT = ("/v1/chat/completions", {"messages": [{"role": "user", "content": "one two three four"}]})
COMPLETION = ("/v1/completions", {"prompt": "one two three four"})
DETAILS = {"cached_tokens_details": {"device": 3, "host": 0}}


def _events(raw: bytes) -> list:
    return [orjson.loads(b[6:]) for b in raw.decode().split("\n\n") if b.startswith("data: {")]


async def _post(stack, path: str, body: dict):
    client, fake = stack
    fake.script.cached_tokens = 3
    response = await client.post(path, data=orjson.dumps({**body, "max_tokens": 4}))
    assert response.status == 200, await response.text()
    return response


@pytest.mark.parametrize("path,body", [CHAT, COMPLETION], ids=["chat", "completions"])
async def test_whole_answer_has_sglext(stack, path, body):
    answer = await (await _post(stack, path, {**body, "return_cached_tokens_details": True})).json()
    assert answer["sglext"] == DETAILS
    assert answer["usage"]["prompt_tokens_details"] == {"cached_tokens": 3}


@pytest.mark.parametrize("path,body", [CHAT, COMPLETION], ids=["chat", "completions"])
async def test_stream_sends_sglext_before_usage(stack, path, body):
    response = await _post(stack, path, {**body, "return_cached_tokens_details": True, "stream": True,
                                         "stream_options": {"include_usage": True}})
    chunks = _events(await response.read())
    sglext, usage = chunks[-2], chunks[-1]
    assert (sglext["choices"], sglext["sglext"], sglext["usage"]) == ([], DETAILS, None)
    assert usage["choices"] == [] and usage["usage"]["prompt_tokens_details"] == {"cached_tokens": 3}
    assert chunks[-3]["choices"][0]["finish_reason"] is not None
    assert all("sglext" not in chunk for chunk in chunks[:-2] + [usage])


@pytest.mark.parametrize("path,body", [CHAT, COMPLETION], ids=["chat", "completions"])
async def test_stream_without_usage_still_sends_sglext_last(stack, path, body):
    response = await _post(stack, path, {**body, "return_cached_tokens_details": True, "stream": True})
    chunks = _events(await response.read())
    assert chunks[-1]["choices"] == [] and chunks[-1]["sglext"] == DETAILS and "usage" not in chunks[-1]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("path,body", [CHAT, COMPLETION], ids=["chat", "completions"])
async def test_not_asked_no_sglext(stack, path, body, stream):
    response = await _post(stack, path, {**body, "stream": stream, "return_cached_tokens_details": False})
    assert b"sglext" not in await response.read()
