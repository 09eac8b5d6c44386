"""Gateway and scheduler processes: their /metrics with every series labelled model_name, as vLLM labels them."""
import copy

# The finished_reason values of request_success_total, each series made at 0 when the process starts, as vLLM makes
# one per FinishReason (vllm/v1/metrics/loggers.py): a counter that first appears at 1 is missed by rate() and
# increase(), so a dashboard never saw the first request to stop, run out of length or be aborted. As vLLM's
# FinishReason (vllm/v1/engine/__init__.py), "abort" is a request its client (or a drain) ended, "error" one the server
# failed (a lost worker, a failed step); vLLM's "repetition" has no detector here.
FINISHED_REASONS = ("stop", "length", "abort", "error")
# vLLM's vllm:num_requests_waiting_by_reason reasons and vllm:engine_sleep_state states (vllm/v1/metrics/loggers.py),
# each series made at the start as vLLM makes them; the gateway mirrors the scheduler's under the same labels.
WAITING_REASONS = ("capacity", "deferred")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")


class ModelLabelled:
    """A view of a prometheus_client registry whose samples all carry model_name (the served model's name), as vLLM
    labels every series: the Grafana dashboards built for vLLM filter each panel on it. "" adds no label."""

    def __init__(self, registry, model_name: str):
        self.registry, self.model_name = registry, model_name

    def collect(self):
        for metric in self.registry.collect():
            if self.model_name:
                metric = copy.copy(metric)
                metric.samples = [sample._replace(labels={**sample.labels, "model_name": self.model_name})
                                  for sample in metric.samples]
            yield metric

    def restricted_registry(self, names):
        """What prometheus_client's HTTP handler asks for a scrape with name[] parameters."""
        return ModelLabelled(self.registry.restricted_registry(names), self.model_name)
