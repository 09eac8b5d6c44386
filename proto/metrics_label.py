"""Gateway and scheduler processes: their /metrics with every series labelled model_name, as vLLM labels them."""
import copy

# The finished_reason values of request_success_total, each series made at 0 when the process starts, as vLLM makes
# one per FinishReason (vllm/v1/metrics/loggers.py): a counter that first appears at 1 is missed by rate() and
# increase(), so a dashboard never saw the first request to stop, run out of length or be aborted. As vLLM's
# FinishReason (vllm/v1/engine/__init__.py), "abort" is a request its client (or a drain) ended, "error" one the server
# failed (a lost worker, a failed step), "repetition" one its repetition check ended (scheduler/repetition.py).
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
# vLLM's vllm:num_requests_waiting_by_reason reasons and vllm:engine_sleep_state states (vllm/v1/metrics/loggers.py),
# each series made at the start as vLLM makes them; the gateway mirrors the scheduler's under the same labels.
WAITING_REASONS = ("capacity", "deferred")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")


# vLLM's series are each an engine core's (vllm/v1/metrics/loggers.py: labelnames ["model_name", "engine"], the engine
# its index, "0" for a server of one engine): its boards group and name series by it (`sum by (instance, engine)`,
# legends "engine {{engine}}", an $engine variable from label_values(..., engine)) and scrapers pick engine="0".
ENGINE_INDEX = "0"


def is_engine_series(name: str) -> bool:
    """Whether a series is one of vLLM's engine series (sparkinfer_ for vllm:), not the gateway's own."""
    return name.startswith("sparkinfer_") and not name.startswith("sparkinfer_gateway_")


def is_llama_cpp_series(name: str) -> bool:
    """Whether a series is one of llama-server's (llamacpp:*, the gateway's), which it writes without labels
    (tools/server/server-context.cpp: `llamacpp:<name> <value>`): its readers match the bare line."""
    return name.startswith("llamacpp:")


class ModelLabelled:
    """A view of a prometheus_client registry whose samples all carry model_name (the served model's name), as vLLM
    labels every series: the Grafana dashboards built for vLLM filter each panel on it. "" adds no label. vLLM's engine
    series carry its engine label too (this server has one engine, "0"); llama-server's series carry none."""

    def __init__(self, registry, model_name: str):
        self.registry, self.model_name = registry, model_name

    def collect(self):
        for metric in self.registry.collect():
            extra = {"model_name": self.model_name} if self.model_name and not is_llama_cpp_series(metric.name) else {}
            if is_engine_series(metric.name):
                extra["engine"] = ENGINE_INDEX
            if extra:
                metric = copy.copy(metric)
                metric.samples = [sample._replace(labels={**sample.labels, **extra}) for sample in metric.samples]
            yield metric

    def restricted_registry(self, names):
        """What prometheus_client's HTTP handler asks for a scrape with name[] parameters."""
        return ModelLabelled(self.registry.restricted_registry(names), self.model_name)
