"""End to end: the /metrics an operator's Prometheus scrapes from the gateway and the scheduler, as vLLM's dashboards
and alerts read them: refusal counters there at 0 before the first refusal, the prompt-token counters of the two
processes equal for n > 1, and no NaN sample on the gateway while its scheduler is down."""
import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.stack import running_gateway

SCHEDULER_REASONS = {"invalid", "duplicate", "queue_full", "unavailable", "shutting_down"}
GATEWAY_REASONS = {"server_overloaded", "server_unavailable", "model_unloadable", "request_timeout"}


def scrape(url: str) -> dict:
    """{(name, frozenset of labels other than model_name): value} of every sample on url's /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = frozenset((k, v) for k, v in sample.labels.items() if k != "model_name")
            samples[(sample.name, labels)] = sample.value
    return samples


def reasons(samples: dict, name: str) -> dict:
    return {dict(labels)["reason"]: value for (sample, labels), value in samples.items() if sample == name}


def test_refusal_counters_are_there_at_zero_before_the_first_refusal(engine_stack):
    with running_gateway(engine_stack) as url:
        scheduler = reasons(scrape(f"http://127.0.0.1:{engine_stack.metrics_port}"),
                            "sparkinfer_requests_rejected_total")
        gateway = reasons(scrape(url), "sparkinfer_gateway_requests_rejected_total")
    assert scheduler == {reason: 0.0 for reason in SCHEDULER_REASONS}
    assert gateway == {reason: 0.0 for reason in GATEWAY_REASONS}

