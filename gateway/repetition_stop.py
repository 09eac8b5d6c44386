"""Gateway process: vLLM's stop on a repeated token pattern as a request asks for it (/v1 chat and completions,
/inference/v1/generate's sampling_params), checked as vLLM checks it; the scheduler applies it
(scheduler/repetition.py)."""
from gateway.errors import InvalidRequest, Unsupported
from proto.repetition_bounds import MAX_MIN_COUNT, MAX_PATTERN_SIZE

FIELDS = ("max_repetition_pattern_size", "min_repetition_pattern_size", "repetition_min_count")
# vLLM's newer form: one object, repetition_detection, with these keys (vllm/sampling_params.py
# RepetitionDetectionParams, on its ChatCompletionRequest / CompletionRequest).
KEYS = ("max_pattern_size", "min_pattern_size", "min_count")


def repetition_stop(body: dict) -> tuple:
    """(largest pattern size, least, count) from the flattened fields (ints by the schema) or the repetition_detection
    object, each 0 unless sent; (0, 0, 0) when off (a largest size of 0, whatever the count). 400 for the values
    vLLM's RepetitionDetectionParams.__post_init__ refuses, and for both forms at once."""
    detection = body.get("repetition_detection")
    if detection is None:
        return _checked([body.get(name) or 0 for name in FIELDS], FIELDS, list(FIELDS))
    if any(body.get(name) for name in FIELDS):
        raise InvalidRequest("repetition_detection cannot be combined with max_repetition_pattern_size, "
                             "min_repetition_pattern_size or repetition_min_count", param="repetition_detection")
    unknown = next((key for key in detection if key not in KEYS), None)
    if unknown is not None:
        raise Unsupported(f"repetition_detection.{unknown}: only max_pattern_size, min_pattern_size and min_count "
                          "are supported", param=f"repetition_detection.{unknown}")
    values = [detection.get(key) if detection.get(key) is not None else 0 for key in KEYS]
    for key, value in zip(KEYS, values):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequest(f"repetition_detection.{key}: Input should be a valid integer",
                                 param=f"repetition_detection.{key}")
    return _checked(values, KEYS, ["repetition_detection"] * 3)


def _checked(values: list, names: tuple, params: list) -> tuple:
    """vLLM's checks, in its order: a negative size or the least above the largest, a largest size past 65536, a
    count past 1000, a count below 2 with a largest size above 0. `names` word the message, `params` name the field."""
    (largest, least, count), (name_max, name_min, name_count) = values, names
    if largest < 0 or least < 0 or least > largest:
        bad = params[1] if least > largest >= 0 or least < 0 else params[0]
        raise InvalidRequest(f"{name_max}, {name_min} must be >=0, with {name_min} <= {name_max}. Set both to 0 to "
                             "disable repetitive pattern detection.", param=bad)
    if largest > MAX_PATTERN_SIZE:
        raise InvalidRequest(f"{name_max} must be at most {MAX_PATTERN_SIZE}, got {largest}.", param=params[0])
    if count > MAX_MIN_COUNT:
        raise InvalidRequest(f"{name_count} must be at most {MAX_MIN_COUNT}, got {count}.", param=params[2])
    if largest > 0 and count < 2:
        raise InvalidRequest(f"{name_count} must be >= 2 to detect repetitive patterns in engine output. If you do "
                             f"not wish to detect repetitive patterns, set {name_max} to 0.", param=params[2])
    # Off: a count vLLM takes without looking at it (a negative one too) is not sent.
    return (largest, least, count) if largest > 0 else (0, 0, 0)


def refuse_repetition_stop(body) -> None:
    """400 unsupported where a request of a route whose server has no such stop (llama.cpp's /completion, LM Studio's
    and SGLang's routes, parsed as /v1 ones) asks for it: its finish ("repetition") has no word in their answers."""
    if isinstance(body, dict) and any(repetition_stop(body)):
        name = "repetition_detection" if body.get("repetition_detection") is not None else FIELDS[0]
        raise Unsupported(f"{name}: ending the output early on a repeated token pattern is not supported", param=name)
