"""Gateway process: llama-server's own /metrics series (llamacpp:*), read at each scrape from what the gateway and
the scheduler already count, so that a monitor of llama-server finds them beside the sparkinfer_ ones."""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from gateway.metrics import GENERATION_TOKENS, PROMPT_TOKENS, REGISTRY, SCHEDULER_LOAD

# llama-server's names and help texts (tools/server/server-context.cpp, its /metrics handler; README "metrics"):
# (name, help, the gateway counter it reads). Counters, so their samples end in _total as llama-server's do.
COUNTERS = (
    ("llamacpp:prompt_tokens", "Number of prompt tokens processed.", PROMPT_TOKENS),
    ("llamacpp:tokens_predicted", "Number of generation tokens processed.", GENERATION_TOKENS),
)
# (name, help, the scheduler's Load field it reads): llama-server's slots processing a request and its tasks
# deferred for want of a free slot are the scheduler's running and waiting requests.
GAUGES = (
    ("llamacpp:requests_processing", "Number of requests processing.", "num_running"),
    ("llamacpp:requests_deferred", "Number of requests deferred.", "num_waiting"),
)


def counter_value(counter) -> float:
    """The value of an unlabelled prometheus_client Counter, from its own collect()."""
    return next(s.value for s in next(iter(counter.collect())).samples if s.name.endswith("_total"))


class LlamaCppSeries:
    """llamacpp:prompt_tokens_total and llamacpp:tokens_predicted_total are sparkinfer_gateway_prompt_tokens_total and
    sparkinfer_gateway_generation_tokens_total under llama-server's names (one count, shown twice, never counted
    again); requests_processing and requests_deferred the scheduler's gauges of the same scrape, left out while it does
    not answer, as the sparkinfer_ ones are."""

    def collect(self):
        for name, doc, counter in COUNTERS:
            yield CounterMetricFamily(name, doc, value=counter_value(counter))
        load = SCHEDULER_LOAD.load
        if load is None:
            return
        for name, doc, field in GAUGES:
            yield GaugeMetricFamily(name, doc, value=getattr(load, field))

    def describe(self):
        """The series' names, so that a scrape naming them (name[]) finds this collector."""
        for name, doc, _ in COUNTERS:
            yield CounterMetricFamily(name, doc)
        for name, doc, _ in GAUGES:
            yield GaugeMetricFamily(name, doc)


REGISTRY.register(LlamaCppSeries())
