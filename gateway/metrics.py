"""Gateway process: Prometheus metrics on its /metrics (sparkinfer_gateway_*; the scheduler owns sparkinfer_*, but for
the per-API-request histograms, whose n only the gateway knows)."""
from __future__ import annotations

import gzip
import re
from typing import Optional, Sequence

from prometheus_client import (CollectorRegistry, Counter, Gauge, GCCollector, Histogram, PlatformCollector,
                               ProcessCollector, disable_created_metrics)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import choose_encoder, gzip_accepted

from gateway import errors
from proto.metrics_buckets import REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS, token_count_buckets
from proto.metrics_label import FINISHED_REASONS, SLEEP_STATES, WAITING_REASONS, ModelLabelled

# As vLLM: no `<name>_created` series beside each counter and histogram (a timestamp per series that doubles the
# scrape and that dashboards never read). Process-wide; the scheduler's metrics module does the same.
disable_created_metrics()
# auto_describe: a collector without describe() (the process and Python ones) is found by a scrape naming its series
# (name[]) by what it collects, as in prometheus_client's default registry.
REGISTRY = CollectorRegistry(auto_describe=True)
# The process's own series (process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, process_max_fds,
# process_start_time_seconds) and Python's, as vLLM's API server serves them from prometheus_client's default registry:
# its instances board's "API server process" row (CPU, memory, open descriptors: a client connection holds one) and
# its Uptime column read them from the API port, and found none here.
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)


UNMATCHED_ROUTE = "unmatched"     # the route label of a path no route serves
HTTP_REQUESTS = Counter("sparkinfer_gateway_http_requests_total", "HTTP requests by route and status.",
                        ["route", "status"], registry=REGISTRY)
# vLLM's API server's own HTTP series, under the names prometheus-fastapi-instrumentator gives them (its default
# metrics, as vllm/entrypoints/serve/instrumentator/metrics.py sets it up): vLLM's overview board reads them bare (its
# "5xx ratio", "HTTP requests by status / by endpoint" and "HTTP mean duration by endpoint" panels). The route template
# is the handler ("none" for a path no route serves), the status its class ("2xx"), and vLLM's excluded handlers
# (searched in the template, as the instrumentator does) are left out: probes and scrapes.
VLLM_HTTP_REQUESTS = Counter("http_requests_total", "Total number of requests by method, status and handler.",
                             ["handler", "method", "status"], registry=REGISTRY)
VLLM_HTTP_DURATION = Histogram("http_request_duration_seconds", "Latency with only few buckets by handler. Made to "
                               "be only used if aggregation by handler is important.", ["handler", "method"],
                               buckets=(0.1, 0.5, 1.0), registry=REGISTRY)
VLLM_HTTP_EXCLUDED = re.compile("/metrics|/health|/load|/ping|/version|/server_info")
REQUESTS_IN_FLIGHT = Gauge("sparkinfer_gateway_requests_in_flight", "Generation requests the gateway is serving.",
                           registry=REGISTRY)
REQUEST_SUCCESS = Counter("sparkinfer_gateway_request_success_total",
                          "Finished choices by finish reason (abort: cancelled, its client gone or the drain over; "
                          "error: failed once admitted, such as by a lost worker).",
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
PROMPT_TOKENS = Counter("sparkinfer_gateway_prompt_tokens_total", "Prompt tokens the scheduler prefilled, per choice "
                        "(counted at its first token, as vLLM counts them).",
                        registry=REGISTRY)
GENERATION_TOKENS = Counter("sparkinfer_gateway_generation_tokens_total", "Generated tokens, counted as they come.",
                            registry=REGISTRY)
TTFT = Histogram("sparkinfer_gateway_time_to_first_token_seconds",
                 "Time from request to its first generated token (any choice).", buckets=TTFT_BUCKETS,
                 registry=REGISTRY)
E2E_LATENCY = Histogram("sparkinfer_gateway_e2e_request_latency_seconds", "Time from request to finish, per choice.",
                        buckets=REQUEST_LATENCY_BUCKETS, registry=REGISTRY)
# vLLM's per-API-request histograms (ParentRequest.observe_finished_request, vllm/v1/engine/parallel_sampling.py):
# once a prompt's n choices have all ended, its n and the most tokens one of them generated. The gateway owns n (the
# scheduler runs one request per choice), so it serves them, under vLLM's names as the scheduler's series are named.
REQUEST_PARAMS_N = Histogram("sparkinfer_request_params_n", "The n request parameter, per prompt of an API request.",
                             buckets=(1, 2, 5, 10, 20), registry=REGISTRY)


class MaxGenerationTokens:
    """sparkinfer_request_max_num_generation_tokens (vLLM's vllm:request_max_num_generation_tokens, its Grafana
    board's "Max Generation Token in Sequence Group" panel), on vLLM's buckets: 1, 2, 5, 10, ... up to the context.
    The gateway learns the context from the model card (and again when the scheduler comes back with another), so
    the counts are kept on the whole 1-2-5 scale and each scrape shows the buckets up to the context it has now."""

    NAME = "sparkinfer_request_max_num_generation_tokens"
    DOC = "The most tokens one choice of a prompt's n generated, per prompt of an API request."
    SCALE = token_count_buckets(10 ** 9)

    def __init__(self):
        self.max_context_len = 0      # 0 until a model card said it: only the +Inf bucket
        self.counts = [0] * len(self.SCALE)
        self.count, self.sum = 0, 0

    def observe(self, num_tokens: int) -> None:
        """One prompt's most tokens generated by a choice: counted in the first bucket of the 1-2-5 scale that holds
        it."""
        self.count += 1
        self.sum += num_tokens
        first = next((i for i, bound in enumerate(self.SCALE) if num_tokens <= bound), None)
        if first is not None:
            self.counts[first] += 1

    def collect(self):
        """A HistogramMetricFamily with the cumulative buckets up to the current context, +Inf, count and sum."""
        buckets, cumulative = [], 0
        for bound, num in zip(self.SCALE, self.counts):
            cumulative += num
            if bound <= self.max_context_len:
                buckets.append((str(float(bound)), cumulative))
        yield HistogramMetricFamily(self.NAME, self.DOC, buckets=[*buckets, ("+Inf", self.count)],
                                    sum_value=self.sum)

    def describe(self):
        """The series' name, so that a scrape naming it (name[]) finds this collector."""
        yield HistogramMetricFamily(self.NAME, self.DOC)


MAX_GENERATION_TOKENS = MaxGenerationTokens()
REGISTRY.register(MAX_GENERATION_TOKENS)


def count_http_request(route: str, method: str, status: int, seconds: float) -> None:
    """One answered HTTP request (or one its client left, under the status it had): in the gateway's
    http_requests_total by route and status, and in vLLM's instrumentator series unless vLLM leaves its handler out."""
    HTTP_REQUESTS.labels(route=route, status=str(status)).inc()
    handler = "none" if route == UNMATCHED_ROUTE else route
    if VLLM_HTTP_EXCLUDED.search(handler):
        return
    VLLM_HTTP_REQUESTS.labels(handler=handler, method=method, status=f"{str(status)[0]}xx").inc()
    VLLM_HTTP_DURATION.labels(handler=handler, method=method).observe(seconds)


def set_max_context_len(max_context_len: int) -> None:
    """The served context (the model card's), which bounds the buckets of the per-request token counts."""
    MAX_GENERATION_TOKENS.max_context_len = max_context_len


def observe_prompts(n: int, generated: Sequence[int], admitted: Sequence[bool]) -> None:
    """The per-API-request histograms of an ended request: one observation per prompt (choices p*n .. p*n+n-1) whose
    n choices the scheduler all admitted (a request refused with 429 or 400 is none, as vLLM never ran it)."""
    for first in range(0, len(generated), n):
        if all(admitted[first:first + n]):
            REQUEST_PARAMS_N.observe(n)
            MAX_GENERATION_TOKENS.observe(max(generated[first:first + n]))


# The scheduler's load, under its own names, read from it at each scrape: vLLM serves its engine gauges on the API
# port's /metrics, and a scrape of this port alone showed neither running requests nor KV usage. A Prometheus that
# scrapes a gateway and its scheduler sees the same values twice.
SCHEDULER_GAUGES = (
    ("sparkinfer_num_requests_running", "Requests holding a state slot (the scheduler's).", "num_running"),
    ("sparkinfer_num_requests_waiting", "Requests admitted, not yet scheduled (the scheduler's).", "num_waiting"),
    ("sparkinfer_kv_cache_usage_perc", "Fraction of KV blocks requests hold, 0-1 (the scheduler's).", "kv_cache_usage"),
)

# vLLM's vllm:num_requests_waiting_by_reason{reason} and vllm:engine_sleep_state{sleep_state}, as the scheduler serves
# them: vLLM's KV-cache board reads the first, its service status board shows a model "Down" without the second.
SCHEDULER_LABELLED_GAUGES = (
    ("sparkinfer_num_requests_waiting_by_reason", "Requests admitted, not yet scheduled, by reason (the scheduler's)."),
    ("sparkinfer_engine_sleep_state", "1 for the engine's sleep state, awake (the scheduler's; it never sleeps)."),
)

UP = ("sparkinfer_gateway_scheduler_up", "1 when the scheduler answered this scrape's load query, else 0 (its gauges "
      "are then left out).")


class SchedulerLoad:
    """The scheduler's gauges as its last Load answered them, and sparkinfer_gateway_scheduler_up. While the scheduler
    does not answer the gauges are left out, not NaN: one NaN makes a sum() over the replicas NaN, and Prometheus'
    exporter practice (prometheus/memcached_exporter#38) is to omit what cannot be read and say so in an _up gauge."""

    def __init__(self):
        self.load = None

    def collect(self):
        """sparkinfer_gateway_scheduler_up, and the scheduler's gauges from its last Load while it answers."""
        yield GaugeMetricFamily(UP[0], UP[1], value=int(self.load is not None))
        if self.load is None:
            return
        for name, doc, field in SCHEDULER_GAUGES:
            yield GaugeMetricFamily(name, doc, value=getattr(self.load, field))
        yield from self._labelled(self.load.num_waiting)

    @staticmethod
    def _labelled(num_waiting: int):
        """The scheduler's labelled gauges as it serves them: its waiting requests all wait for capacity, and its
        engine is awake (it has no sleep mode)."""
        (waiting_name, waiting_doc), (sleep_name, sleep_doc) = SCHEDULER_LABELLED_GAUGES
        waiting = GaugeMetricFamily(waiting_name, waiting_doc, labels=["reason"])
        for reason in WAITING_REASONS:
            waiting.add_metric([reason], num_waiting if reason == "capacity" else 0)
        sleep = GaugeMetricFamily(sleep_name, sleep_doc, labels=["sleep_state"])
        for state in SLEEP_STATES:
            sleep.add_metric([state], int(state == "awake"))
        return waiting, sleep

    def describe(self):
        """The series' names, so that a scrape naming them (name[]) finds this collector."""
        for name, doc, *_ in (UP, *SCHEDULER_GAUGES, *SCHEDULER_LABELLED_GAUGES):
            yield GaugeMetricFamily(name, doc)


SCHEDULER_LOAD = SchedulerLoad()
REGISTRY.register(SCHEDULER_LOAD)


def set_scheduler_load(load) -> None:
    """The scheduler's gauges from its pb.LoadResponse; None (it did not answer) leaves them out of the scrape."""
    SCHEDULER_LOAD.load = load


def render(accept: Optional[str] = None, model_name: str = "", names: Sequence[str] = ()) -> tuple[bytes, str]:
    """The exposition text and its content type, chosen from the scraper's Accept header as prometheus_client's own
    handler chooses it (vLLM's /metrics, the scheduler's): text 0.0.4 unless OpenMetrics or text 1.0.0 is asked for.
    `names` (the name[] query parameters) keeps only those series, as that handler does. Every series carries
    model_name (none while the name is not known yet)."""
    encoder, content_type = choose_encoder(accept or "")
    registry = ModelLabelled(REGISTRY, model_name)
    return encoder(registry.restricted_registry(names) if names else registry), content_type


def compressed(body: bytes, accept_encoding: Optional[str]) -> tuple[bytes, dict]:
    """The exposition body gzipped when the scraper's Accept-Encoding takes gzip (Prometheus sends it on every scrape),
    with its Content-Encoding header, as prometheus_client's own handler answers (the scheduler's /metrics, vLLM's);
    else as it is."""
    if gzip_accepted(accept_encoding or ""):
        return gzip.compress(body), {"Content-Encoding": "gzip"}
    return body, {}
