"""The scheduler's per-request histograms under vLLM's names (vllm/v1/metrics/loggers.py: vllm:request_prompt_tokens,
request_generation_tokens, request_params_max_tokens, request_prefill_time_seconds, request_decode_time_seconds,
request_inference_time_seconds, request_time_per_output_token_seconds; their values as vllm/v1/metrics/stats.py update_from_finished_request takes them):
a Grafana dashboard made for vLLM's series (its prompt / generation length heatmaps, prefill and decode time) found
none of them here."""
from prometheus_client import CollectorRegistry, generate_latest

from proto import pb
from proto.metrics_buckets import token_count_buckets
from scheduler.engine_stats import RequestTimer
from scheduler.metrics import Metrics
from scheduler.request import Request

S = 1_000_000_000


def value(text: str, line_start: str) -> float:
    return float(next(line for line in text.splitlines() if line.startswith(line_start)).rsplit(" ", 1)[1])


def finished_request(**times) -> Request:
    req = Request("r", [1, 2, 3, 4, 5], pb.SamplingParams(), 8, **times)
    req.output_token_ids = [7, 8, 9]
    req.finish_reason = "length"
    return req


def test_a_finished_request_is_observed_in_each_histogram():
    registry = CollectorRegistry()
    timer = RequestTimer(Metrics(registry, max_model_len=100))
    # arrived at 1 s, scheduled at 3 s, first token at 4 s, last at 7 s
    timer.finished(finished_request(arrival_ns=1 * S, first_scheduled_ns=3 * S, first_token_ns=4 * S,
                                    last_token_ns=7 * S))
    text = generate_latest(registry).decode()
    assert value(text, "sparkinfer_request_prompt_tokens_sum") == 5.0
    assert value(text, 'sparkinfer_request_prompt_tokens_bucket{le="5.0"}') == 1.0
    assert value(text, 'sparkinfer_request_prompt_tokens_bucket{le="2.0"}') == 0.0
    assert value(text, "sparkinfer_request_generation_tokens_sum") == 3.0
    assert value(text, "sparkinfer_request_params_max_tokens_sum") == 8.0
    assert value(text, "sparkinfer_request_prefill_time_seconds_sum") == 1.0
    assert value(text, "sparkinfer_request_decode_time_seconds_sum") == 3.0
    assert value(text, "sparkinfer_request_inference_time_seconds_sum") == 4.0
    # vLLM's TPOT: 3 s of decode over the 2 tokens after the first
    assert value(text, "sparkinfer_request_time_per_output_token_seconds_sum") == 1.5
    assert value(text, 'sparkinfer_request_time_per_output_token_seconds_bucket{le="1.0"}') == 0.0
    assert value(text, 'sparkinfer_request_time_per_output_token_seconds_bucket{le="2.5"}') == 1.0
    assert value(text, 'sparkinfer_request_success_total{finished_reason="length"}') == 1.0


def test_a_request_that_left_before_its_first_token_has_no_phase_times():
    registry = CollectorRegistry()
    timer = RequestTimer(Metrics(registry))
    req = finished_request(arrival_ns=1 * S)
    req.output_token_ids, req.finish_reason = [], ""
    timer.finished(req)
    text = generate_latest(registry).decode()
    assert value(text, "sparkinfer_request_prompt_tokens_count") == 1.0
    assert value(text, "sparkinfer_request_generation_tokens_sum") == 0.0
    assert value(text, "sparkinfer_request_prefill_time_seconds_count") == 0.0
    assert value(text, "sparkinfer_request_decode_time_seconds_count") == 0.0
    assert value(text, "sparkinfer_request_time_per_output_token_seconds_count") == 0.0


def test_a_request_of_one_token_has_a_time_per_output_token_of_0():
    # vLLM: decode_time / (num_generation_tokens - 1) if there is more than one token, else 0
    registry = CollectorRegistry()
    timer = RequestTimer(Metrics(registry))
    req = finished_request(arrival_ns=1 * S, first_scheduled_ns=2 * S, first_token_ns=3 * S, last_token_ns=3 * S)
    req.output_token_ids = [7]
    timer.finished(req)
    text = generate_latest(registry).decode()
    assert value(text, "sparkinfer_request_time_per_output_token_seconds_count") == 1.0
    assert value(text, "sparkinfer_request_time_per_output_token_seconds_sum") == 0.0


def test_token_buckets_are_vllms_1_2_5_up_to_the_context():
    assert token_count_buckets(100) == (1, 2, 5, 10, 20, 50, 100)
    assert token_count_buckets(8192)[-2:] == (2000, 5000)
