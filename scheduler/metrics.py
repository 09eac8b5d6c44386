"""Scheduler process: Prometheus metrics (design.md section 6 names), served over HTTP at /metrics."""
import threading
from bisect import bisect_left
from collections import Counter as Tally
from itertools import accumulate
from math import inf as INF

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, disable_created_metrics, start_http_server
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from proto.metrics_buckets import (INTER_TOKEN_BUCKETS, ITERATION_TOKEN_BUCKETS, QUEUE_TIME_BUCKETS,
                                   REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS, token_count_buckets)
from proto.metrics_label import FINISHED_REASONS, SLEEP_STATES, WAITING_REASONS, ModelLabelled
from scheduler.admission import REJECT_REASONS

PROMPT_TOKEN_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")

# As vLLM (prometheus_client.disable_created_metrics() in its metrics loggers): no `<name>_created` series beside each
# counter and histogram; a creation timestamp per series doubles the scrape and no dashboard reads it.
disable_created_metrics()


class Metrics:
    """Every scheduler metric; `registry` lets tests hold several engines in one process. `max_model_len` bounds the
    buckets of the per-request token counts, as vLLM's."""

    def __init__(self, registry=REGISTRY, max_model_len: int = 1 << 20):
        self._registry = registry
        self._add_gauges()
        self._add_latency_histograms()
        self._add_request_histograms(max_model_len)
        self._add_counters()

    def _gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(name, doc, registry=self._registry)

    def _histogram(self, name: str, doc: str, buckets) -> Histogram:
        return Histogram(name, doc, buckets=buckets, registry=self._registry)

    def _add_gauges(self) -> None:
        gauge = self._gauge
        self.num_requests_running = gauge("sparkinfer_num_requests_running", "Requests holding a state slot")
        self.num_requests_waiting = gauge("sparkinfer_num_requests_waiting", "Requests admitted, not yet scheduled")
        self.kv_cache_usage_perc = gauge("sparkinfer_kv_cache_usage_perc", "Fraction of KV blocks requests hold "
                                         "(0-1); blocks only the prefix cache holds count as free")
        self.worker_alive = gauge("sparkinfer_worker_alive", "1 while a worker answers pings")
        # vLLM's vllm:num_requests_waiting_by_reason: its KV-cache board's "Waiting for capacity" and queue panels read
        # reason="capacity" (waiting for KV blocks or a batch seat) and "deferred" (held back by a LoRA budget or a KV
        # transfer, none here). Every request waiting here waits for capacity.
        self.num_requests_waiting_by_reason = Gauge("sparkinfer_num_requests_waiting_by_reason", "Requests admitted, "
                                                    "not yet scheduled, by reason", ["reason"], registry=self._registry)
        for reason in WAITING_REASONS:
            self.num_requests_waiting_by_reason.labels(reason=reason)
        self.num_requests_waiting_for_capacity = self.num_requests_waiting_by_reason.labels(reason="capacity")
        # vLLM's vllm:engine_sleep_state, awake 1 unless its engine was put to sleep (this one never is): vLLM's service
        # status board shows a model "Down" when no awake series answers, and status pages count awake engines by it.
        self.engine_sleep_state = Gauge("sparkinfer_engine_sleep_state", "1 for the engine's sleep state (awake; "
                                        "weights_offloaded and discard_all are vLLM's sleep levels 1 and 2, never "
                                        "entered here)", ["sleep_state"], registry=self._registry)
        for state in SLEEP_STATES:
            self.engine_sleep_state.labels(sleep_state=state).set(int(state == "awake"))
        # vLLM's vllm:cache_config_info: an info gauge at 1 whose labels are the KV cache's configuration. The Gateway
        # API Inference Extension's endpoint picker reads block_size and num_gpu_blocks from it to size its prefix-cache
        # scorer. Set from each worker's hello (a new worker may bring another pool).
        self.cache_config_info = Gauge("sparkinfer_cache_config_info", "The KV cache's configuration (labels; 1)",
                                       ["block_size", "num_gpu_blocks", "enable_prefix_caching"],
                                       registry=self._registry)

    def set_cache_config(self, block_size: int, num_blocks: int, prefix_caching: bool) -> None:
        """The info gauge's one series: this worker's KV pool (vLLM's label names and str() values)."""
        self.cache_config_info.clear()
        self.cache_config_info.labels(block_size=str(block_size), num_gpu_blocks=str(num_blocks),
                                      enable_prefix_caching=str(bool(prefix_caching))).set(1)

    def _add_latency_histograms(self) -> None:
        histogram = self._histogram
        self.time_to_first_token = histogram("sparkinfer_time_to_first_token_seconds", "Arrival to first token",
                                             TTFT_BUCKETS)
        # Observed once a step, every gap of the step's tokens at a time (RequestTimer.flush).
        self.inter_token_latency = BatchedHistogram("sparkinfer_inter_token_latency_seconds", "Between tokens of a "
                                                    "request", INTER_TOKEN_BUCKETS, self._registry)
        self.e2e_request_latency = histogram("sparkinfer_e2e_request_latency_seconds", "Arrival to finish",
                                             REQUEST_LATENCY_BUCKETS)
        self.request_queue_time = histogram("sparkinfer_request_queue_time_seconds", "Arrival to first scheduled "
                                            "(to leaving, for a request that left while waiting)",
                                            QUEUE_TIME_BUCKETS)
        # vLLM's vllm:iteration_tokens_total (its dashboards' steps/s and tokens-per-step panels): one observation a
        # step, the tokens it ran through the model (prefill chunks, and one per decoding request).
        self.iteration_tokens = histogram("sparkinfer_iteration_tokens_total", "Tokens per engine step",
                                          ITERATION_TOKEN_BUCKETS)

    def _add_request_histograms(self, max_model_len: int) -> None:
        histogram = self._histogram
        # vLLM's per-request histograms, observed as each request leaves (vllm/v1/metrics/stats.py
        # update_from_finished_request): its prompt and output lengths, and its prefill (first scheduled -> first token),
        # decode (first -> last token) and inference (first scheduled -> last token) times, preemptions included.
        tokens = token_count_buckets(max_model_len)
        self.request_prompt_tokens = histogram("sparkinfer_request_prompt_tokens", "Prompt tokens of a finished "
                                               "request", tokens)
        # vLLM's vllm:request_prefill_kv_computed_tokens: the prompt tokens a request had to prefill, its cached ones
        # left out.
        self.request_prefill_kv_computed_tokens = histogram("sparkinfer_request_prefill_kv_computed_tokens", "Prompt "
                                                            "tokens of a finished request prefilled (its cached ones "
                                                            "excluded)", tokens)
        self.request_generation_tokens = histogram("sparkinfer_request_generation_tokens", "Tokens a finished "
                                                   "request generated", tokens)
        self.request_params_max_tokens = histogram("sparkinfer_request_params_max_tokens", "Output limit of a "
                                                   "finished request (as the gateway resolved it)", tokens)
        self.request_prefill_time = histogram("sparkinfer_request_prefill_time_seconds", "First scheduled to first "
                                              "token", REQUEST_LATENCY_BUCKETS)
        self.request_decode_time = histogram("sparkinfer_request_decode_time_seconds", "First to last token",
                                             REQUEST_LATENCY_BUCKETS)
        self.request_inference_time = histogram("sparkinfer_request_inference_time_seconds", "First scheduled to "
                                                "last token", REQUEST_LATENCY_BUCKETS)
        # vLLM's TPOT (vllm:request_time_per_output_token_seconds, the series its Grafana TPOT panels read): a request's
        # decode time over its tokens after the first (0 with one token), on the inter-token buckets.
        self.request_time_per_output_token = histogram("sparkinfer_request_time_per_output_token_seconds", "Mean time "
                                                       "per output token of a finished request (its first excluded)",
                                                       INTER_TOKEN_BUCKETS)

    def _add_counters(self) -> None:
        registry = self._registry
        self.prompt_tokens = Counter("sparkinfer_prompt_tokens", "Prompt tokens prefilled", registry=registry)
        # vLLM's split of prompt_tokens by where the KV came from (PromptTokenStats in vllm/v1/metrics/stats.py):
        # computed here, or a prefix-cache hit; this engine has no KV connector, so external_kv_transfer stays 0.
        self.prompt_tokens_by_source = Counter("sparkinfer_prompt_tokens_by_source", "Prompt tokens by source",
                                               ["source"], registry=registry)
        for source in PROMPT_TOKEN_SOURCES:
            self.prompt_tokens_by_source.labels(source=source)
        self.prompt_tokens_cached = Counter("sparkinfer_prompt_tokens_cached", "Prompt tokens the prefix cache "
                                            "served", registry=registry)
        self.generation_tokens = Counter("sparkinfer_generation_tokens", "Tokens generated", registry=registry)
        self.request_success = Counter("sparkinfer_request_success", "Finished requests",
                                       ["finished_reason"], registry=registry)
        for reason in FINISHED_REASONS:
            self.request_success.labels(finished_reason=reason)
        self.requests_rejected = Counter("sparkinfer_requests_rejected", "Requests refused at admission",
                                         ["reason"], registry=registry)
        for reason in REJECT_REASONS:
            self.requests_rejected.labels(reason=reason)
        self.num_preemptions = Counter("sparkinfer_num_preemptions", "Preemptions by recompute", registry=registry)
        self.prefix_cache_queries = Counter("sparkinfer_prefix_cache_queries", "Prompt tokens of admitted "
                                            "requests looked up in the prefix cache", registry=registry)
        self.prefix_cache_hits = Counter("sparkinfer_prefix_cache_hits", "Prompt tokens found in the prefix cache",
                                         registry=registry)


def serve_metrics(host: str, port: int, model_name: str = "") -> None:
    """Starts the /metrics HTTP endpoint on host:port (a daemon thread); port 0 = off. The host is the gRPC one:
    prometheus_client's default 0.0.0.0 put `make run`'s metrics on every interface while the rest stays on
    loopback. Every series carries model_name, as vLLM's (and the gateways') do."""
    if port:
        start_http_server(port, addr=host, registry=ModelLabelled(REGISTRY, model_name))


class BatchedHistogram:
    """A histogram observed a list of values at a time: a custom collector (prometheus_client's public Collector
    protocol, a HistogramMetricFamily per scrape) with one lock and one increment per bucket touched for the list,
    where Histogram.observe takes two locked increments and a bucket scan per value (1.2 us a token, 0.3 ms of a
    256-row step: bench/scheduler_host.py). prometheus_client has no batch observe; its maintainers point such uses at
    a custom collector (prometheus/client_python#911, #1124). Its exposition is a Histogram's with the same name,
    help and buckets: `le` written by prometheus_client.utils.floatToGoString, _bucket (cumulative), _count, _sum, no
    _created (disabled above); tests/unit/test_scheduler_metrics_batched.py pins it."""

    def __init__(self, name: str, documentation: str, buckets, registry):
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError("buckets not in sorted order")
        self._name, self._documentation = name, documentation
        self._upper_bounds = bounds if bounds[-1] == INF else bounds + [INF]
        self._counts = [0] * len(self._upper_bounds)   # per bucket, not cumulative
        self._sum = 0.0
        self._lock = threading.Lock()
        registry.register(self)

    def observe(self, value: float) -> None:
        """One observation, as Histogram.observe."""
        self.observe_all([value])

    def observe_all(self, values: list) -> None:
        """Every v of `values` in the first bucket whose upper bound is >= v, as Histogram.observe puts it."""
        if not values:
            return
        tally = Tally(bisect_left(self._upper_bounds, v) for v in values)
        total = sum(values)
        with self._lock:
            for index, count in tally.items():
                self._counts[index] += count
            self._sum += total

    def describe(self) -> list:
        """The family without samples: the registry learns the names (name[] scrapes, duplicate checks)."""
        return [HistogramMetricFamily(self._name, self._documentation)]

    def collect(self) -> list:
        """The histogram as one HistogramMetricFamily: cumulative buckets, count and sum, read under the lock."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        buckets = [(floatToGoString(bound), num) for bound, num in zip(self._upper_bounds, accumulate(counts))]
        return [HistogramMetricFamily(self._name, self._documentation, buckets=buckets, sum_value=total)]
