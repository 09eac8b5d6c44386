"""Unit tests: a choice whose request was closed before its Generate call was even made (the client gone as the
request started) is no finished request in the gateway's request_success_total (nor its e2e latency histogram), as
the scheduler, which never had it, counts none; a choice whose call was made is one "abort" once its client leaves,
admitted or not yet (the scheduler admits a call as it takes it, so it counts that abort too). vLLM counts a finished
request only from its engine's outputs (OutputProcessor.process_outputs -> IterationStats.update_from_finished_request),
so one that never reached the engine counts nowhere. Found by bench/soak.py: after 1500 requests a fifth of them cut
by their clients, the gateway counted 4 more finished choices than the scheduler (1861 against 1857), all "abort"."""
import asyncio

import orjson
import pytest

from gateway import metrics
from gateway.client import SchedulerClient
from gateway.engine import Engine
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway, start_fake_server
from gateway.gen_request import GenRequest

TOKENIZER = build_tokenizer()
USER = [{"role": "user", "content": "hi"}]


class SlowToAdmit(FakeServing):
    """A scheduler that takes `admit_after_s` to take a call (busy, or the call still on its way): nothing is
    admitted until then."""

    admit_after_s = 0.0

    async def Generate(self, request, context):
        await asyncio.sleep(self.admit_after_s)
        async for message in super().Generate(request, context):
            yield message


@pytest.fixture
async def stack():
    fake = SlowToAdmit(TOKENIZER, max_context_len=2048)
    fake.script.reply, fake.script.delay_s = "Hello world " * 40, 0.05
    async with fake_gateway(fake) as pair:
        yield pair


def counts() -> tuple:
    value = metrics.REGISTRY.get_sample_value
    return (value("sparkinfer_gateway_request_success_total", {"finished_reason": "abort"}) or 0.0,
            value("sparkinfer_gateway_e2e_request_latency_seconds_count") or 0.0)


async def _left_after(client, body: dict, seconds: float) -> None:
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(client.post("/v1/chat/completions", data=orjson.dumps(body)), timeout=seconds)


async def _in_flight_back(before: float) -> None:
    for _ in range(60):
        if (metrics.REGISTRY.get_sample_value("sparkinfer_gateway_requests_in_flight") or 0.0) <= before:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the request is still in flight")


@pytest.mark.parametrize("n", [1, 3])
async def test_a_request_closed_before_its_calls_were_made_is_no_finished_request(n):
    fake = SlowToAdmit(TOKENIZER, max_context_len=2048)
    server, addr = await start_fake_server(fake)
    client = SchedulerClient(addr)
    try:
        engine = Engine(client)
        before, in_flight = counts(), metrics.REGISTRY.get_sample_value("sparkinfer_gateway_requests_in_flight")
        # start() returns before its choices' tasks ran: closing now is a client gone before any call was made
        gen = await engine.start(GenRequest("closed-at-once", TOKENIZER.encode("hi there").ids, 200, n=n))
        await gen.close()
        assert counts() == before
        assert metrics.REGISTRY.get_sample_value("sparkinfer_gateway_requests_in_flight") == in_flight
        assert fake.script.requests == []
    finally:
        await client.close()
        await server.stop(None)


@pytest.mark.parametrize("n", [1, 3])
async def test_a_choice_left_before_its_admission_arrived_is_one_abort(stack, n):
    client, fake = stack
    fake.admit_after_s = 5.0
    (aborts, e2e), in_flight = counts(), metrics.REGISTRY.get_sample_value("sparkinfer_gateway_requests_in_flight")
    await _left_after(client, {"messages": USER, "max_tokens": 200, "n": n}, 0.3)
    await _in_flight_back(in_flight or 0.0)
    assert counts() == (aborts + n, e2e + n)


async def test_a_choice_left_once_admitted_is_one_abort(stack):
    client, fake = stack
    fake.admit_after_s = 0.0
    (aborts, e2e), in_flight = counts(), metrics.REGISTRY.get_sample_value("sparkinfer_gateway_requests_in_flight")
    await _left_after(client, {"messages": USER, "max_tokens": 200, "n": 2}, 0.4)
    await _in_flight_back(in_flight or 0.0)
    assert counts() == (aborts + 2, e2e + 2)
