"""Gateway process: Prometheus metrics on its /metrics (sparkinfer_gateway_*; the scheduler owns sparkinfer_*)."""
from __future__ import annotations

from typing import Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.exposition import choose_encoder

# As vLLM: no `<name>_created` series beside each counter and histogram (a timestamp per series that doubles the
# scrape and that dashboards never read). Process-wide; the scheduler's metrics module does the same.
disable_created_metrics()
REGISTRY = CollectorRegistry()

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

HTTP_REQUESTS = Counter("sparkinfer_gateway_http_requests_total", "HTTP requests by route and status.",
                        ["route", "status"], registry=REGISTRY)
REQUESTS_IN_FLIGHT = Gauge("sparkinfer_gateway_requests_in_flight", "Generation requests the gateway is serving.",
                           registry=REGISTRY)
REQUEST_SUCCESS = Counter("sparkinfer_gateway_request_success_total", "Finished generations by finish reason.",
                          ["finished_reason"], registry=REGISTRY)
REJECTED = Counter("sparkinfer_gateway_requests_rejected_total", "Requests refused with an error, by reason.",
                   ["reason"], registry=REGISTRY)
CLIENT_DISCONNECTED = Counter("sparkinfer_gateway_client_disconnected_total",
                              "Requests cancelled because the client went away.", registry=REGISTRY)
PROMPT_TOKENS = Counter("sparkinfer_gateway_prompt_tokens_total", "Prompt tokens of served requests.",
                        registry=REGISTRY)
GENERATION_TOKENS = Counter("sparkinfer_gateway_generation_tokens_total", "Generated tokens of served requests.",
                            registry=REGISTRY)
TTFT = Histogram("sparkinfer_gateway_time_to_first_token_seconds",
                 "Time from request to its first generated token (any choice).", buckets=_LATENCY_BUCKETS,
                 registry=REGISTRY)
E2E_LATENCY = Histogram("sparkinfer_gateway_e2e_request_latency_seconds", "Time from request to finish, per choice.",
                        buckets=_LATENCY_BUCKETS, registry=REGISTRY)


def render(accept: Optional[str] = None) -> tuple[bytes, str]:
    """The exposition text and its content type, chosen from the scraper's Accept header as prometheus_client's own
    handler chooses it (vLLM's /metrics, the scheduler's): text 0.0.4 unless OpenMetrics or text 1.0.0 is asked for."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(REGISTRY), content_type
