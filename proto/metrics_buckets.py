"""Gateway and scheduler processes: their latency histograms' buckets, as vLLM's (vllm/v1/metrics/loggers.py)."""

# Time to first token, and time in the queue (vLLM's are from 0.3 s, which hid every wait of a few ms): from 1 ms,
# up to the 43 minutes a long prompt can queue for behind others.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
# Between two tokens of a request: from 1 ms (vLLM's start at 10 ms, but a decode step here is 7-10 ms on an H200).
INTER_TOKEN_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                       40.0, 80.0)
# A whole request: a reasoning model's answer of tens of thousands of tokens takes minutes.
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                           240.0, 480.0, 960.0, 1920.0, 7680.0)

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
