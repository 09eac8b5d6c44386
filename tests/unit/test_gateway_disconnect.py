"""Unit tests: a client that goes away mid-request cancels its generation and is counted once in
sparkinfer_gateway_client_disconnected_total, whether the request streamed or not (non-streamed ones were not
counted at all), on every API."""
import asyncio

import orjson
import pytest

from gateway import metrics
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TOKENIZER = build_tokenizer()
USER = [{"role": "user", "content": "hi"}]


def disconnected() -> float:
    return metrics.REGISTRY.get_sample_value("sparkinfer_gateway_client_disconnected_total") or 0.0


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=2048)
    fake.script.reply, fake.script.delay_s = "Hello world " * 40, 0.05
    async with fake_gateway(fake, sse_keepalive_s=0.2) as pair:
        yield pair


async def _settled(fake) -> None:
    for _ in range(60):
        if fake.num_running == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{fake.num_running} generations still running after the client left")


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 200}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 200}),
    ("/api/chat", {"model": "fake-model", "messages": USER, "stream": False, "options": {"num_predict": 200}}),
    ("/api/v0/chat/completions", {"messages": USER, "max_tokens": 200}),
])
async def test_non_streamed_request_left_by_its_client(stack, path, body):
    client, fake = stack
    before = disconnected()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(client.post(path, data=orjson.dumps(body)), timeout=0.4)
    await _settled(fake)
    assert disconnected() == before + 1


async def test_streamed_request_left_by_its_client_counts_once(stack):
    client, fake = stack
    before = disconnected()
    response = await client.post("/v1/chat/completions", data=orjson.dumps(
        {"messages": USER, "max_tokens": 200, "stream": True}))
    await response.content.readline()
    response.close()
    await _settled(fake)
    for _ in range(20):        # the handler notices at its next write
        if disconnected() > before:
            break
        await asyncio.sleep(0.05)
    assert disconnected() == before + 1
    done = await client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "max_tokens": 2}))
    assert done.status == 200 and orjson.loads(await done.read())["usage"]["completion_tokens"] == 2
