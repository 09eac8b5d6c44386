"""Unit tests (CPU): bench/serve_ttft.py's reading of the scheduler's histograms (means over the requests between
two scrapes of /metrics)."""
from bench.serve_ttft import histogram_means_ms, histogram_sums

PAGE = """# TYPE sparkinfer_time_to_first_token_seconds histogram
sparkinfer_time_to_first_token_seconds_sum{{model_name="m",engine="0"}} {ttft}
sparkinfer_time_to_first_token_seconds_count{{model_name="m",engine="0"}} {n}
# TYPE sparkinfer_request_prefill_time_seconds histogram
sparkinfer_request_prefill_time_seconds_sum{{model_name="m",engine="0"}} {prefill}
sparkinfer_request_prefill_time_seconds_count{{model_name="m",engine="0"}} {n}
# TYPE sparkinfer_generation_tokens counter
sparkinfer_generation_tokens_total{{model_name="m",engine="0"}} 99.0
"""


def test_means_are_taken_over_the_requests_between_two_scrapes():
    before = histogram_sums(PAGE.format(ttft=1.0, prefill=0.5, n=10))
    after = histogram_sums(PAGE.format(ttft=1.2, prefill=0.66, n=14))
    assert "sparkinfer_generation_tokens_total" not in after
    means = histogram_means_ms(before, after)
    assert abs(means["sparkinfer_time_to_first_token_seconds"] - 50.0) < 1e-9  # 0.2 s over 4 requests
    assert abs(means["sparkinfer_request_prefill_time_seconds"] - 40.0) < 1e-9
    assert means["sparkinfer_request_queue_time_seconds"] is None  # not on the page: no observation
