"""The latency histograms have vLLM's buckets (vllm/v1/metrics/loggers.py): the e2e latency and queue time of the
scheduler stopped at 80 s and the gateway's at 120 s, so every longer request (a reasoning model's answer of thousands
of tokens) fell into +Inf and histogram_quantile read any p50 / p99 above them as 80 (or 120) s."""
from prometheus_client import CollectorRegistry, generate_latest

from gateway import metrics as gateway_metrics
from scheduler.metrics import Metrics


def bucket(text: str, series: str, le: str) -> float:
    prefix = f'{series}_bucket{{le="{le}"}} '
    return float(next(line for line in text.splitlines() if line.startswith(prefix))[len(prefix):])


def test_a_five_minute_request_lands_in_a_finite_bucket():
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.e2e_request_latency.observe(300.0)
    metrics.request_queue_time.observe(100.0)
    metrics.time_to_first_token.observe(100.0)
    metrics.inter_token_latency.observe(0.012)
    text = generate_latest(registry).decode()
    assert bucket(text, "sparkinfer_e2e_request_latency_seconds", "240.0") == 0.0
    assert bucket(text, "sparkinfer_e2e_request_latency_seconds", "480.0") == 1.0
    assert bucket(text, "sparkinfer_request_queue_time_seconds", "80.0") == 0.0
    assert bucket(text, "sparkinfer_request_queue_time_seconds", "160.0") == 1.0
    assert bucket(text, "sparkinfer_time_to_first_token_seconds", "160.0") == 1.0
    assert bucket(text, "sparkinfer_inter_token_latency_seconds", "0.01") == 0.0
    assert bucket(text, "sparkinfer_inter_token_latency_seconds", "0.02") == 1.0


def test_the_gateway_histograms_have_the_same_buckets():
    text = generate_latest(gateway_metrics.REGISTRY).decode()
    les = [line.split('le="')[1].split('"')[0] for line in text.splitlines()
           if line.startswith("sparkinfer_gateway_e2e_request_latency_seconds_bucket")]
    assert les[-3:] == ["1920.0", "7680.0", "+Inf"] and les[0] == "0.3"
    les = [line.split('le="')[1].split('"')[0] for line in text.splitlines()
           if line.startswith("sparkinfer_gateway_time_to_first_token_seconds_bucket")]
    assert les[0] == "0.001" and les[-2] == "2560.0"


# vLLM's buckets per series (vllm/v1/metrics/loggers.py PrometheusStatLogger): its Grafana boards query a bucket by its
# le, such as the overview board's TPOT SLO panel (request_time_per_output_token_seconds_bucket{le="$tpot_slo"}, its
# choices 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5), so each of these bounds has to be one of ours.
VLLM_TOKEN_GAP = ("0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.75", "1.0", "2.5",
                  "5.0", "7.5", "10.0", "20.0", "40.0", "80.0")
VLLM_REQUEST = ("0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "15.0", "20.0", "30.0", "40.0", "50.0",
                "60.0", "120.0", "240.0", "480.0", "960.0", "1920.0", "7680.0")
VLLM_TTFT = ("0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0",
             "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0")
VLLM_BUCKETS = {
    "inter_token_latency_seconds": VLLM_TOKEN_GAP, "request_time_per_output_token_seconds": VLLM_TOKEN_GAP,
    "time_to_first_token_seconds": VLLM_TTFT, "e2e_request_latency_seconds": VLLM_REQUEST,
    "request_queue_time_seconds": VLLM_REQUEST, "request_prefill_time_seconds": VLLM_REQUEST,
    "request_decode_time_seconds": VLLM_REQUEST, "request_inference_time_seconds": VLLM_REQUEST,
}


def test_every_vllm_bucket_bound_is_one_of_the_schedulers():
    registry = CollectorRegistry()
    Metrics(registry)
    text = generate_latest(registry).decode()
    for series, bounds in VLLM_BUCKETS.items():
        prefix = f"sparkinfer_{series}_bucket{{"
        ours = {line.split('le="')[1].split('"')[0] for line in text.splitlines() if line.startswith(prefix)}
        assert set(bounds) <= ours, (series, sorted(set(bounds) - ours))
