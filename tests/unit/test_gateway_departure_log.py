"""Unit tests: a request its client left has its access-log line, as every answered request has (aiohttp logs none
for a cancelled handler, so an abort storm left no trace in the log while the metrics counted it): under the 200 a
stream it left midway had started, with the bytes it had sent (aiohttp counts a response's bytes only at its end, so
such a line said 0), else 499 (nginx's "client closed request") with the request's id."""
import asyncio
import logging

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    fake.script.reply, fake.script.delay_s = "Hello world " * 40, 0.05
    async with fake_gateway(fake) as pair:
        yield pair


async def _access_line(caplog, request_line: str) -> str:
    """The access-log line of request_line, once the handler noticed its client left (at its next write)."""
    for _ in range(60):
        lines = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access" and request_line in r.getMessage()]
        if lines:
            return lines[-1]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no access-log line for {request_line}")


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 200}),
    ("/api/chat", {"model": "fake-model", "messages": USER, "stream": False, "options": {"num_predict": 200}}),
    ("/v1/messages", {"model": "fake-model", "messages": USER, "max_tokens": 200}),
])
async def test_a_request_left_before_its_answer_is_logged_as_499(stack, caplog, path, body):
    client, fake = stack
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(client.post(path, data=orjson.dumps(body), headers={"X-Request-Id": "left-1"}),
                               timeout=0.4)
    line = await _access_line(caplog, f'"POST {path} HTTP/1.1"')
    assert f'"POST {path} HTTP/1.1" 499 0 ' in line and line.endswith(" request_id=left-1")


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 200, "stream": True}),
    ("/api/chat", {"model": "fake-model", "messages": USER, "options": {"num_predict": 200}}),
    ("/v1/responses", {"model": "fake-model", "input": "hi", "max_output_tokens": 200, "stream": True}),
])
async def test_a_stream_left_midway_is_logged_under_its_200(stack, caplog, path, body):
    client, fake = stack
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    response = await client.post(path, data=orjson.dumps(body))
    first = await response.content.readline()
    response.close()
    line = await _access_line(caplog, f'"POST {path} HTTP/1.1"')
    assert f'"POST {path} HTTP/1.1" 200 ' in line
    # %b, as aiohttp logs a finished answer: the bytes written, its headers included; at least the line read
    sent = int(line.split(f'"POST {path} HTTP/1.1" 200 ')[1].split()[0])
    assert sent > len(first) + len("HTTP/1.1 200 OK\r\n")
