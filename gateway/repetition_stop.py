"""Gateway process: vLLM's stop on a repeated token pattern as a request asks for it (/v1 chat and completions,
/inference/v1/generate's sampling_params), checked as vLLM checks it; the scheduler applies it
(scheduler/repetition.py)."""
from gateway.errors import InvalidRequest

FIELDS = ("max_repetition_pattern_size", "min_repetition_pattern_size", "repetition_min_count")
# vLLM's bounds (vllm/sampling_params.py _MAX_ABSOLUTE_PATTERN_SIZE, _MAX_ABSOLUTE_MIN_COUNT).
MAX_PATTERN_SIZE, MAX_MIN_COUNT = 65536, 1000


def repetition_stop(body: dict) -> tuple:
    """(max_repetition_pattern_size, min_repetition_pattern_size, repetition_min_count), each 0 unless sent (ints by
    the schema). 400 for the values vLLM's RepetitionDetectionParams.__post_init__ refuses, in its order: a negative
    size or the least above the largest, a largest size past 65536, a count past 1000, and a count below 2 with a
    largest size above 0. All 0 (the default) is off; so is a largest size of 0 whatever the count."""
    largest, least, count = (body.get(name) or 0 for name in FIELDS)
    if largest < 0 or least < 0 or least > largest:
        bad = "min_repetition_pattern_size" if least > largest >= 0 or least < 0 else "max_repetition_pattern_size"
        raise InvalidRequest("max_repetition_pattern_size, min_repetition_pattern_size must be >=0, with "
                             "min_repetition_pattern_size <= max_repetition_pattern_size. Set both to 0 to disable "
                             "repetitive pattern detection.", param=bad)
    if largest > MAX_PATTERN_SIZE:
        raise InvalidRequest(f"max_repetition_pattern_size must be at most {MAX_PATTERN_SIZE}, got {largest}.",
                             param="max_repetition_pattern_size")
    if count > MAX_MIN_COUNT:
        raise InvalidRequest(f"repetition_min_count must be at most {MAX_MIN_COUNT}, got {count}.",
                             param="repetition_min_count")
    if largest > 0 and count < 2:
        raise InvalidRequest("repetition_min_count must be >= 2 to detect repetitive patterns in engine output. If "
                             "you do not wish to detect repetitive patterns, set max_repetition_pattern_size to 0.",
                             param="repetition_min_count")
    # Off: a count vLLM takes without looking at it (a negative one too) is not sent.
    return (largest, least, count) if largest > 0 else (0, 0, 0)
