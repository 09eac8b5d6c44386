"""Gateway process: Prometheus metrics on its /metrics (sparkinfer_gateway_*; the scheduler owns sparkinfer_*)."""
from __future__ import annotations

import math
from typing import Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.exposition import choose_encoder

from gateway import errors
from proto.metrics_buckets import REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS
from proto.metrics_label import FINISHED_REASONS, ModelLabelled

# As vLLM: no `<name>_created` series beside each counter and histogram (a timestamp per series that doubles the
# scrape and that dashboards never read). Process-wide; the scheduler's metrics module does the same.
disable_created_metrics()
REGISTRY = CollectorRegistry()


HTTP_REQUESTS = Counter("sparkinfer_gateway_http_requests_total", "HTTP requests by route and status.",
                        ["route", "status"], registry=REGISTRY)
REQUESTS_IN_FLIGHT = Gauge("sparkinfer_gateway_requests_in_flight", "Generation requests the gateway is serving.",
                           registry=REGISTRY)
REQUEST_SUCCESS = Counter("sparkinfer_gateway_request_success_total",
                          "Finished choices by finish reason (abort: cancelled, its client gone, or failed once "
                          "admitted, such as by a lost worker).",
                          ["finished_reason"], registry=REGISTRY)
for _reason in FINISHED_REASONS:
    REQUEST_SUCCESS.labels(finished_reason=_reason)
REJECTED = Counter("sparkinfer_gateway_requests_rejected_total", "Requests refused with an error, by reason.",
                   ["reason"], registry=REGISTRY)
# The refusals of a server at capacity or without its engine (429, 503, 504), made at 0 at the start as the scheduler's
# requests_rejected_total reasons are, so that rate() and an alert see the first of each.
for _reason in (errors.Overloaded.code, errors.Unavailable.code, errors.ModelUnloadable.code, errors.Timeout.code):
    REJECTED.labels(reason=_reason)
CLIENT_DISCONNECTED = Counter("sparkinfer_gateway_client_disconnected_total",
                              "Requests cancelled because the client went away.", registry=REGISTRY)
PROMPT_TOKENS = Counter("sparkinfer_gateway_prompt_tokens_total",
                        "Prompt tokens the scheduler prefilled (counted at the first token, as vLLM counts them).",
                        registry=REGISTRY)
GENERATION_TOKENS = Counter("sparkinfer_gateway_generation_tokens_total", "Generated tokens, counted as they come.",
                            registry=REGISTRY)
TTFT = Histogram("sparkinfer_gateway_time_to_first_token_seconds",
                 "Time from request to its first generated token (any choice).", buckets=TTFT_BUCKETS,
                 registry=REGISTRY)
E2E_LATENCY = Histogram("sparkinfer_gateway_e2e_request_latency_seconds", "Time from request to finish, per choice.",
                        buckets=REQUEST_LATENCY_BUCKETS, registry=REGISTRY)
# The scheduler's load, under its own names, read from it at each scrape: vLLM serves its engine gauges on the API
# port's /metrics, and a scrape of this port alone showed neither running requests nor KV usage. NaN when the
# scheduler does not answer. A Prometheus that scrapes a gateway and its scheduler sees the same values twice.
NUM_REQUESTS_RUNNING = Gauge("sparkinfer_num_requests_running", "Requests holding a state slot (the scheduler's).",
                             registry=REGISTRY)
NUM_REQUESTS_WAITING = Gauge("sparkinfer_num_requests_waiting", "Requests admitted, not yet scheduled (the "
                             "scheduler's).", registry=REGISTRY)
KV_CACHE_USAGE = Gauge("sparkinfer_kv_cache_usage_perc", "Fraction of KV blocks requests hold, 0-1 (the scheduler's).",
                       registry=REGISTRY)


def set_scheduler_load(load) -> None:
    """The scheduler's gauges from its pb.LoadResponse; NaN for None (it did not answer)."""
    values = (load.num_running, load.num_waiting, load.kv_cache_usage) if load is not None else (math.nan,) * 3
    for gauge, value in zip((NUM_REQUESTS_RUNNING, NUM_REQUESTS_WAITING, KV_CACHE_USAGE), values):
        gauge.set(value)


def render(accept: Optional[str] = None, model_name: str = "") -> tuple[bytes, str]:
    """The exposition text and its content type, chosen from the scraper's Accept header as prometheus_client's own
    handler chooses it (vLLM's /metrics, the scheduler's): text 0.0.4 unless OpenMetrics or text 1.0.0 is asked for.
    Every series carries model_name (none while the name is not known yet)."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(ModelLabelled(REGISTRY, model_name)), content_type
