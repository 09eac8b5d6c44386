"""Unit tests: once a SIGTERMed gateway's drain grace is over, what still runs ends with the 503 each API can still
carry (a stream its own error event after the text it sent, a request not answered yet its error body), instead of a
stream cut mid-body and a queued request left with no response at all (measured on a stack on port 8230 with
SPARKINFER_DRAIN_GRACE_S=2: RemoteProtocolError on both)."""
import asyncio

import orjson
import pytest

from gateway.app import CONFIG_KEY, ENGINE_KEY, _end_the_rest
from gateway.errors import Unavailable
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TOKENIZER = build_tokenizer()
USER = [{"role": "user", "content": "hi"}]
SHUTTING_DOWN = "the server is shutting down: the request did not finish within its drain grace of 30 s"


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=2048)
    fake.script.reply, fake.script.delay_s = "Hello world " * 100, 0.02
    async with fake_gateway(fake, sse_keepalive_s=5.0) as pair:
        yield pair


async def _settled(fake) -> None:
    """The fake scheduler saw every call cancelled (it notices a cancel at its next step)."""
    for _ in range(150):
        if fake.num_running == 0:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{fake.num_running} generations still running")


async def _running(fake, num: int) -> None:
    for _ in range(100):
        if fake.num_running >= num:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{fake.num_running} generations running, expected {num}")


def _grace_over(client) -> None:
    _end_the_rest(client.server.app[ENGINE_KEY], client.server.app[CONFIG_KEY], early=False)


@pytest.mark.parametrize("path, body, last", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 1000, "stream": True},
     lambda lines: (lines[-2]["error"]["code"], lines[-2]["error"]["message"], lines[-1])),
    ("/completion", {"prompt": "hi", "n_predict": 1000, "stream": True},
     lambda lines: (lines[-1]["error"]["code"], lines[-1]["error"]["message"], lines[-1]["error"]["type"])),
    ("/api/generate", {"model": "fake-model", "prompt": "hi", "options": {"num_predict": 1000}},
     lambda lines: (None, lines[-1]["error"], None)),
    ("/v1/messages", {"model": "fake-model", "messages": USER, "max_tokens": 1000, "stream": True},
     lambda lines: (lines[-1]["type"], lines[-1]["error"]["message"], lines[-1]["error"]["type"])),
], ids=["openai", "llama.cpp", "ollama", "anthropic"])
async def test_a_stream_past_the_grace_ends_with_its_error_event(stack, path, body, last):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200
    await response.content.readline()
    _grace_over(client)
    text = (await asyncio.wait_for(response.read(), 5)).decode()
    lines = [line.removeprefix("data: ") for line in text.splitlines()
             if line.strip() and not line.startswith(("event:", ":"))]
    lines = [line if line == "[DONE]" else orjson.loads(line) for line in lines]
    code, message, tail = last(lines)
    assert message.startswith(SHUTTING_DOWN)
    assert (code, tail) == {"/v1/chat/completions": ("server_unavailable", "[DONE]"),
                            "/completion": (503, "unavailable_error"), "/api/generate": (None, None),
                            "/v1/messages": ("error", "overloaded_error")}[path]
    await _settled(fake)


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 1000}),
    ("/api/chat", {"model": "fake-model", "messages": USER, "stream": False, "options": {"num_predict": 1000}}),
], ids=["openai", "ollama"])
async def test_a_request_not_answered_yet_gets_a_503(stack, path, body):
    client, fake = stack
    pending = asyncio.create_task(client.post(path, data=orjson.dumps(body)))
    await _running(fake, 1)
    _grace_over(client)
    response = await asyncio.wait_for(pending, 5)
    error = orjson.loads(await response.read())["error"]
    assert response.status == 503 and response.headers["Retry-After"] == "1"
    assert (error if path == "/api/chat" else error["message"]).startswith(SHUTTING_DOWN)


async def test_the_requests_that_finished_are_left_alone(stack):
    client, fake = stack
    done = await client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "max_tokens": 2}))
    assert done.status == 200
    assert client.server.app[ENGINE_KEY].abort_all(Unavailable("unused")) == 0
