"""Gateway and scheduler processes: vLLM's bounds on its stop on a repeated token pattern (vllm/sampling_params.py
_MAX_ABSOLUTE_PATTERN_SIZE, _MAX_ABSOLUTE_MIN_COUNT). The gateway refuses values past them
(gateway/repetition_stop.py); the scheduler turns off a check past them that a direct gRPC client sent
(scheduler/repetition.py). Kept here because both processes' images copy proto/."""
MAX_PATTERN_SIZE = 65536
MAX_MIN_COUNT = 1000
