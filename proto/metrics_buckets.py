"""Gateway and scheduler processes: their latency histograms' buckets, as vLLM's (vllm/v1/metrics/loggers.py)."""

# Time to first token: vLLM's, from 1 ms up to the 43 minutes a long prompt can queue for behind others.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
# Between two tokens of a request, and a request's mean time per output token: vLLM's bounds (0.01, 0.025, 0.05, 0.075,
# 0.1, 0.15, ... 80), each one kept because its boards query a bucket by its le (the TPOT SLO panel of its overview
# board reads request_time_per_output_token_seconds_bucket{le="$tpot_slo"}, 0.025 to 0.5 s), with finer ones below 25 ms
# (a decode step here is 7-10 ms on an H200).
INTER_TOKEN_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
                       0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
# A whole request: a reasoning model's answer of tens of thousands of tokens takes minutes.
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                           240.0, 480.0, 960.0, 1920.0, 7680.0)
# Time in the queue: vLLM's request buckets (its vllm:request_queue_time_seconds), every bound kept, with the time to
# first token's below 0.3 s (vLLM's start there, which hid every wait of a few ms).
QUEUE_TIME_BUCKETS = tuple(sorted(set(TTFT_BUCKETS) | set(REQUEST_LATENCY_BUCKETS)))

# Tokens one engine step runs: vLLM's vllm:iteration_tokens_total buckets (vllm/v1/metrics/loggers.py), from one
# decode token up to a full prefill chunk.
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def token_count_buckets(max_value: int) -> tuple:
    """Buckets of a per-request token count, vLLM's build_1_2_5_buckets(max_model_len): 1, 2, 5, 10, 20, 50, ... up to
    the context length."""
    buckets, exponent = [], 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10 ** exponent
            if value > max_value:
                return tuple(buckets)
            buckets.append(value)
        exponent += 1
