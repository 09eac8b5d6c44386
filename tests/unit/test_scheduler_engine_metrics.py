"""Unit tests: the scheduler's step engine's Prometheus metrics (finish reasons, queue time, preemptions, iteration
tokens) against an in-memory worker link (no sockets, no torch)."""
import asyncio

import pytest

from scheduler.admission import WorkerUnavailableError
from tests.unit.test_scheduler_engine import drain, make_engine, request


def _sample(metric, suffix: str, **labels) -> float:
    return next(sample.value for family in metric.collect() for sample in family.samples
                if sample.name.endswith(suffix) and all(sample.labels.get(k) == v for k, v in labels.items()))


async def test_aborted_requests_are_timed_counted_and_forgotten():
    """A request its client left and one a lost worker failed, both after their first token: each counts once, under
    abort and under error (vLLM's FinishReason: abort is "aborted by client", error the server's failure), is observed
    in the e2e histogram like any finished request (its count is the request_success total), and leaves nothing behind
    (RequestTimer kept each one's last-token time forever)."""
    engine, link = await make_engine()
    gone = engine.submit(request("gone", max_tokens=0))
    assert (await asyncio.wait_for(gone.get(), 2)).token_ids
    engine.cancel("gone")
    lost = engine.submit(request("lost", max_tokens=0))
    assert (await asyncio.wait_for(lost.get(), 2)).token_ids
    link.auto = False
    with pytest.raises(WorkerUnavailableError):
        await drain(lost)
    metrics = engine.metrics
    assert _sample(metrics.request_success, "_total", finished_reason="abort") == 1
    assert _sample(metrics.request_success, "_total", finished_reason="error") == 1
    assert _sample(metrics.e2e_request_latency, "_count") == 2
    assert engine.timer.last_token_ns == {} and engine.streams == {}
    await engine.stop()


async def test_requests_that_leave_before_a_token_are_in_the_queue_time_histogram():
    """A client that gives up while its request waits for a seat, and one whose request was seated but had no token
    yet: each still counts in request_queue_time (it was observed on the first message only, so the longest waits,
    the ones clients gave up on, were missing), with its wait: arrival to the abort while waiting, arrival to first
    scheduled once seated (vLLM's ScheduledTiming). The histogram's count stays the request_success total."""
    engine, link = await make_engine(max_num_seqs=1)
    link.auto = False
    engine.submit(request("seated"))
    engine.submit(request("queued"))
    while not any(m.WhichOneof("kind") == "step" for m in link.sent):
        await asyncio.sleep(0)
    seated, queued = engine.streams["seated"].req, engine.streams["queued"].req
    assert seated.first_scheduled_ns and not queued.first_scheduled_ns
    engine.cancel("queued")
    engine.cancel("seated")
    metrics = engine.metrics
    assert _sample(metrics.request_queue_time, "_count") == 2
    assert _sample(metrics.request_success, "_total", finished_reason="abort") == 2
    assert _sample(metrics.request_queue_time, "_sum") >= (seated.first_scheduled_ns - seated.arrival_ns) / 1e9
    await engine.stop()


async def test_preemptions_are_counted_in_the_metric():
    """Four requests that each grow to 410 tokens in a 1024-token pool (64 blocks of 16): the scheduler preempts by
    recompute while it plans a step, and sparkinfer_num_preemptions_total counts each one, as vLLM's
    vllm:num_preemptions_total does. It was counted only around applying a step's result, where nothing is
    preempted, so it stayed 0 while Load reported the preemptions."""
    engine, _ = await make_engine()
    results = await asyncio.gather(*(drain(engine.submit(request(f"r{i}", max_tokens=400))) for i in range(4)))
    assert all(len(tokens) == 400 for tokens, _ in results)
    load = engine.load()
    assert load.num_preemptions > 0
    assert _sample(engine.metrics.num_preemptions, "_total") == load.num_preemptions
    await engine.stop()


async def test_each_step_is_observed_with_its_tokens_in_iteration_tokens():
    """vLLM's vllm:iteration_tokens_total (the steps/s and tokens-per-step panels of dashboards made for vLLM): one
    observation a step, the tokens it ran. It was not served, so those panels showed nothing."""
    engine, _ = await make_engine()
    await asyncio.gather(drain(engine.submit(request("a", num_prompt=40, max_tokens=6))),
                         drain(engine.submit(request("b", num_prompt=3, max_tokens=9))))
    histogram = engine.metrics.iteration_tokens
    assert engine.stats.num_steps > 0
    assert _sample(histogram, "_count") == engine.stats.num_steps
    # Every prompt token once and every generated token but each request's last one (sampled, never run).
    assert _sample(histogram, "_sum") == engine.stats.num_tokens == 40 + 3 + 5 + 8
    assert _sample(histogram, "_bucket", le="1.0") > 0
    assert _sample(histogram, "_bucket", le="+Inf") == engine.stats.num_steps
    await engine.stop()
