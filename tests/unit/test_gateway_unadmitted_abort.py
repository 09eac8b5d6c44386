"""Unit tests: a choice whose client left before the scheduler admitted it is no finished request in the gateway's
request_success_total (nor its e2e latency histogram), as the scheduler, which never had it, counts none; a choice
the scheduler admitted is one "abort" in both. vLLM counts a finished request only from its engine's outputs
(OutputProcessor.process_outputs -> IterationStats.update_from_finished_request), so one that never reached the
engine counts nowhere. Found by bench/soak.py: after 1500 requests a fifth of them cut by their clients, the gateway
counted 4 more finished choices than the scheduler (1861 against 1857), all "abort"."""
import asyncio

import orjson
import pytest

from gateway import metrics
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

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
async def test_a_choice_left_before_admission_is_no_finished_request(stack, n):
    client, fake = stack
    fake.admit_after_s = 5.0
    before, in_flight = counts(), metrics.REGISTRY.get_sample_value("sparkinfer_gateway_requests_in_flight") or 0.0
    await _left_after(client, {"messages": USER, "max_tokens": 200, "n": n}, 0.3)
    await _in_flight_back(in_flight)
    assert counts() == before
    assert fake.num_running == 0


async def test_a_choice_left_once_admitted_is_one_abort(stack):
    client, fake = stack
    fake.admit_after_s = 0.0
    (aborts, e2e), in_flight = counts(), metrics.REGISTRY.get_sample_value("sparkinfer_gateway_requests_in_flight")
    await _left_after(client, {"messages": USER, "max_tokens": 200, "n": 2}, 0.4)
    await _in_flight_back(in_flight or 0.0)
    assert counts() == (aborts + 2, e2e + 2)
