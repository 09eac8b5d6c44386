"""Unit tests: the per-token metrics counted once a step (RequestTimer.flush, metrics.BatchedHistogram) read on /metrics
as the per-token observe and inc did."""
import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from proto.metrics_buckets import INTER_TOKEN_BUCKETS
from scheduler.metrics import Metrics
from tests.unit.test_scheduler_engine import drain, make_engine, request


def series(registry, prefix: str) -> dict:
    """{series line name: value} of every line of /metrics text that starts with `prefix`."""
    text = generate_latest(registry).decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(prefix)}


def test_observe_all_fills_the_buckets_observe_fills():
    # On a bound, just past it, below the first, past the last finite one (+Inf), and repeats.
    values = [0.001, 0.0010001, 0.0, 0.0004, 0.012, 0.012, 0.5, 7.0, 1e9, 0.02, 0.0200001]
    one_by_one, at_once = CollectorRegistry(), CollectorRegistry()
    reference, batched = Metrics(one_by_one), Metrics(at_once)
    for v in values:
        reference.inter_token_latency.observe(v)
    batched.inter_token_latency.observe_all(values)
    batched.inter_token_latency.observe_all([])
    name = "sparkinfer_inter_token_latency_seconds"
    expected, got = series(one_by_one, name), series(at_once, name)
    assert got.keys() == expected.keys() and len(got) > 3
    for key, value in expected.items():
        assert abs(got[key] - value) <= 1e-9 * max(1.0, abs(value)), key


@pytest.mark.parametrize("expose", [generate_latest, generate_openmetrics], ids=["text-0.0.4", "openmetrics"])
def test_the_batched_histogram_is_exposed_as_a_prometheus_histogram(expose):
    """Byte for byte what prometheus_client's Histogram of the same name, help and buckets exposes (HELP, TYPE, le
    strings, _bucket, _count, _sum, no _created), also for a name[] scrape; one batch sums in Histogram's order."""
    values = [0.0, 0.001, 0.0009, 0.012, 0.5, 0.75, 1.0, 7.5, 100.0, 0.0200001, 80.0]
    mine, reference = CollectorRegistry(), CollectorRegistry()
    Metrics(mine).inter_token_latency.observe_all(values)
    histogram = Histogram("sparkinfer_inter_token_latency_seconds", "Between tokens of a request",
                          buckets=INTER_TOKEN_BUCKETS, registry=reference)
    for v in values:
        histogram.observe(v)
    name = "sparkinfer_inter_token_latency_seconds"
    block = [line for line in expose(mine).decode().splitlines() if name in line]
    assert "\n".join(block) + "\n" == expose(reference).decode().replace("# EOF\n", "")
    assert len(block) == 2 + len(INTER_TOKEN_BUCKETS) + 3
    only = [name + "_count"]
    assert expose(mine.restricted_registry(only)) == expose(reference.restricted_registry(only))


async def test_the_engine_counts_every_token_and_gap_of_its_streams():
    engine, _ = await make_engine()
    results = [await drain(engine.submit(request(f"r{i}", 5 + i, max_tokens=4 + i))) for i in range(3)]
    num_tokens = sum(len(tokens) for tokens, _ in results)
    registry = engine.metrics._registry
    assert series(registry, "sparkinfer_generation_tokens_total")["sparkinfer_generation_tokens_total"] == num_tokens
    # One gap per token after each request's first.
    gaps = series(registry, "sparkinfer_inter_token_latency_seconds_count")
    assert gaps["sparkinfer_inter_token_latency_seconds_count"] == num_tokens - 3
    await engine.stop()
