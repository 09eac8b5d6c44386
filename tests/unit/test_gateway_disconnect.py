"""Unit tests: a client that goes away mid-request cancels its generation and is counted once in
sparkinfer_gateway_client_disconnected_total, whether the request streamed or not (non-streamed ones were not
counted at all), on every API."""
import asyncio
import contextlib
import logging
import re

import orjson
import pytest

from gateway import metrics
from gateway.client import SchedulerClient
from gateway.engine import Engine
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway, start_fake_server
from gateway.gen_request import GenRequest

TOKENIZER = build_tokenizer()
USER = [{"role": "user", "content": "hi"}]


def disconnected() -> float:
    return metrics.REGISTRY.get_sample_value("sparkinfer_gateway_client_disconnected_total") or 0.0


def gateway_value(name: str) -> float:
    return metrics.REGISTRY.get_sample_value(name) or 0.0


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=2048)
    fake.script.reply, fake.script.delay_s = "Hello world " * 40, 0.05
    async with fake_gateway(fake, sse_keepalive_s=0.2) as pair:
        yield pair


async def _counted(before: float) -> float:
    """The disconnect counter once it passed `before` (the handler counts the lost client after it cancelled the
    generation, so a moment after the fake scheduler settles), or as it is after ~2 s."""
    for _ in range(40):
        if disconnected() > before:
            break
        await asyncio.sleep(0.05)
    return disconnected()


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
    assert await _counted(before) == before + 1


async def test_streamed_request_left_by_its_client_counts_once(stack):
    client, fake = stack
    before = disconnected()
    response = await client.post("/v1/chat/completions", data=orjson.dumps(
        {"messages": USER, "max_tokens": 200, "stream": True}))
    await response.content.readline()
    response.close()
    await _settled(fake)
    assert await _counted(before) == before + 1  # the handler notices at its next write
    done = await client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "max_tokens": 2}))
    assert done.status == 200 and orjson.loads(await done.read())["usage"]["completion_tokens"] == 2


async def test_a_close_cancelled_midway_still_ends_the_request_in_the_metrics():
    """A client that leaves during a write: the write fails first, the handler closes its generation, and aiohttp's
    cancel for the lost connection lands while close() waits for the cancelled choices. The request must still leave
    requests_in_flight and have its tokens counted (the gauge crept up by one per such request, seen live with
    RST and FIN disconnects on /v1/responses, /api/v0 and /v1/chat/completions streams)."""
    fake = FakeServing(TOKENIZER, max_context_len=2048)
    fake.script.reply, fake.script.delay_s = "Hello world " * 40, 0.02
    server, addr = await start_fake_server(fake)
    client = SchedulerClient(addr)
    try:
        engine = Engine(client)
        in_flight = gateway_value("sparkinfer_gateway_requests_in_flight")
        prompt_tokens = gateway_value("sparkinfer_gateway_prompt_tokens_total")
        prompt_ids = TOKENIZER.encode("hi there").ids
        gen = await engine.start(GenRequest("close-cancelled", prompt_ids, 200, n=2))
        assert await gen.next() is not None
        assert gateway_value("sparkinfer_gateway_requests_in_flight") == in_flight + 1
        closing = asyncio.create_task(gen.close())
        await asyncio.sleep(0)          # close() has cancelled the choices and waits for them
        closing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await closing
        assert closing.cancelled()
        assert gateway_value("sparkinfer_gateway_requests_in_flight") == in_flight
        # Counted per choice the scheduler had prefilled (as vLLM counts n > 1): one or both by the time of the close.
        counted = gateway_value("sparkinfer_gateway_prompt_tokens_total") - prompt_tokens
        assert counted in (len(prompt_ids), 2 * len(prompt_ids))
        await _settled(fake)
    finally:
        await client.close()
        await server.stop(None)


async def test_a_write_to_a_closed_connection_is_a_quiet_disconnect(stack, monkeypatch, caplog):
    """A client that leaves mid-stream is often seen first by a write (aiohttp's ClientConnectionResetError: Cannot
    write to closing transport), before aiohttp cancels the handler. That was logged as a handler fault: an ERROR
    "Error handling request" with a traceback (7 of them in one 200-stream abort storm) and a 500 attempted on the
    dead socket. It is a disconnect: counted once, the generation closed, nothing logged above INFO."""
    from aiohttp import web
    from aiohttp.client_exceptions import ClientConnectionResetError

    client, fake = stack
    real_write, writes = web.StreamResponse.write, []

    async def write(self, data):
        writes.append(data)
        if len(writes) == 3:
            raise ClientConnectionResetError("Cannot write to closing transport")
        return await real_write(self, data)

    monkeypatch.setattr(web.StreamResponse, "write", write)
    before = disconnected()
    with caplog.at_level(logging.INFO):
        response = await client.post("/v1/chat/completions", data=orjson.dumps(
            {"messages": USER, "max_tokens": 200, "stream": True}))
        received = b""
        with contextlib.suppress(Exception):
            async for chunk in response.content.iter_any():
                received += chunk
        await _settled(fake)
    assert response.status == 200 and received.startswith(b"data: {") and b"internal" not in received
    assert disconnected() == before + 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def scraped(text: str, series: str) -> float:
    """The value of one series in a /metrics exposition (0 when absent)."""
    for line in text.splitlines():
        # every series carries model_name (the served name), vLLM's engine series engine: left out of the comparison
        line = re.sub(r'(model_name|engine)="[^"]*",?', "", line).replace(",}", "}").replace("{}", "")
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


ABORTED = 'sparkinfer_gateway_request_success_total{finished_reason="abort"}'
PROMPT = "sparkinfer_gateway_prompt_tokens_total"
E2E_COUNT = "sparkinfer_gateway_e2e_request_latency_seconds_count"


async def _scrape(client) -> str:
    return (await (await client.get("/metrics")).read()).decode()


async def test_a_request_left_before_its_first_token_counts_no_prompt_tokens_and_one_abort(stack):
    """C14's queued variant read on the API port's /metrics: the client of a request still waiting for its first token
    leaves. Its prompt tokens were counted in sparkinfer_gateway_prompt_tokens_total all the same (vLLM, and the
    scheduler's own counter, count them at the first token: this one was never prefilled), and it showed in no
    sparkinfer_gateway_request_success_total series (vLLM #31503: an aborted request is finished_reason "abort")."""
    client, fake = stack
    fake.script.delay_s = 5.0
    before = await _scrape(client)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(client.post("/v1/completions", data=orjson.dumps(
            {"prompt": "hi there", "max_tokens": 200})), timeout=0.4)
    await _settled(fake)
    after = await _scrape(client)
    assert scraped(after, PROMPT) == scraped(before, PROMPT)
    assert scraped(after, ABORTED) == scraped(before, ABORTED) + 1
    assert scraped(after, E2E_COUNT) == scraped(before, E2E_COUNT) + 1


async def test_a_stream_left_midway_is_an_abort_with_its_tokens_counted(stack):
    client, fake = stack
    before = await _scrape(client)
    response = await client.post("/v1/completions", data=orjson.dumps(
        {"prompt": "hi there", "max_tokens": 200, "stream": True}))
    for _ in range(3):
        await response.content.readline()
    during = await _scrape(client)
    assert scraped(during, "sparkinfer_num_requests_running") == 1.0
    generated = scraped(during, "sparkinfer_gateway_generation_tokens_total") - scraped(
        before, "sparkinfer_gateway_generation_tokens_total")
    assert generated >= 1           # counted as they come, not only at the end
    response.close()
    await _settled(fake)
    for _ in range(20):             # the handler notices at its next write
        after = await _scrape(client)
        if scraped(after, ABORTED) > scraped(before, ABORTED):
            break
        await asyncio.sleep(0.05)
    assert scraped(after, ABORTED) == scraped(before, ABORTED) + 1
    assert scraped(after, PROMPT) == scraped(before, PROMPT) + len(TOKENIZER.encode("hi there").ids)
    assert scraped(after, "sparkinfer_num_requests_running") == 0.0


def http_requests(text: str, route: str, status: str) -> float:
    return scraped(text, f'sparkinfer_gateway_http_requests_total{{route="{route}",status="{status}"}}')


async def test_requests_left_by_their_clients_are_in_http_requests_total(stack):
    """A request its client left was in no sparkinfer_gateway_http_requests_total series (the middleware counted only
    the responses a handler returned): an abort storm showed as no traffic. A stream left midway counts under the 200
    its headers carried, as vLLM's HTTP metrics count it; one left before any answer under 499, nginx's status for a
    client that closed its request."""
    client, fake = stack
    before = await _scrape(client)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(client.post("/v1/chat/completions", data=orjson.dumps(
            {"messages": USER, "max_tokens": 200})), timeout=0.4)
    response = await client.post("/api/chat", data=orjson.dumps(
        {"model": "fake-model", "messages": USER, "options": {"num_predict": 200}}))
    await response.content.readline()
    response.close()
    await _settled(fake)
    for _ in range(20):             # the handler notices at its next write
        after = await _scrape(client)
        if http_requests(after, "/api/chat", "200") > http_requests(before, "/api/chat", "200"):
            break
        await asyncio.sleep(0.05)
    assert http_requests(after, "/v1/chat/completions", "499") == http_requests(
        before, "/v1/chat/completions", "499") + 1
    assert http_requests(after, "/api/chat", "200") == http_requests(before, "/api/chat", "200") + 1
