"""Scheduler process: admission checks that run before any expensive work (queue depth, prompt, sampling values)."""

import struct
from collections import OrderedDict
from itertools import islice

MAX_NUM_LOGPROBS = 20
MAX_REJECTED_GROUPS = 1024     # group_ids remembered so that a refused n > 1 request counts once


class RequestError(Exception):
    """A request the scheduler refuses; `code` is the grpc.StatusCode name the server answers with."""

    code = "INVALID_ARGUMENT"
    reason = "invalid"          # requests_rejected_total label


class InvalidRequestError(RequestError):
    code = "INVALID_ARGUMENT"
    reason = "invalid"


class DuplicateRequestError(RequestError):
    code = "ALREADY_EXISTS"
    reason = "duplicate"


class QueueFullError(RequestError):
    code = "RESOURCE_EXHAUSTED"
    reason = "queue_full"


class WorkerUnavailableError(RequestError):
    code = "UNAVAILABLE"
    reason = "unavailable"


class ShuttingDownError(RequestError):
    """A new request while the scheduler drains (SIGTERM): the gateway answers 503, a balancer retries elsewhere."""
    code = "UNAVAILABLE"
    reason = "shutting_down"


# The reasons submit() refuses a request for (requests_rejected_total's label), each series made at 0 when the
# scheduler starts, as request_success_total's are: a counter that first appears at 1 is missed by rate() and
# increase(), so an alert on the first refusals (a full queue, a drain) never fired.
REJECT_REASONS = (InvalidRequestError.reason, DuplicateRequestError.reason, QueueFullError.reason,
                  WorkerUnavailableError.reason, ShuttingDownError.reason)

def check_queue_depth(num_waiting: int, max_queue_depth: int) -> None:
    """Raises QueueFullError when `max_queue_depth` (> 0) requests already wait; 0 means unlimited."""
    if max_queue_depth > 0 and num_waiting >= max_queue_depth:
        raise QueueFullError(
            f"queue full: {num_waiting} requests waiting (SPARKINFER_MAX_QUEUE_DEPTH={max_queue_depth})")


def num_queued_requests(scheduler, streams, limit: int = 0) -> int:
    """API requests that really wait: the waiting requests past the ones the next step seats (max_num_seqs minus
    the running ones; none while the first cannot fit the KV pool: Scheduler.head_fits), the choices of one API
    request (a shared group_id in `streams`) counted once; counting stops at `limit` (> 0), all a depth check needs,
    so a long queue is not walked for each new request."""
    num_free_seats = max(0, scheduler.max_num_seqs - scheduler.num_running) if scheduler.head_fits() else 0
    keys = set()
    for req in islice(scheduler.waiting, num_free_seats, None):
        if limit and len(keys) >= limit:
            break
        stream = streams.get(req.req_id)
        keys.add((stream.group_id if stream is not None else "") or req.req_id)
    return len(keys)


class ContextLengthError(InvalidRequestError):
    """A prompt, or a prompt plus max_tokens, that does not fit the context; the counts let a gateway word it."""

    def __init__(self, max_context_len: int, num_prompt: int, max_tokens: int = 0):
        self.counts = (max_context_len, num_prompt, max_tokens)
        # vLLM's words, as the gateway words them (gateway/openai_checks.py output_overflow_message and
        # prompt_overflow_message; the scheduler imports nothing from the gateway).
        if max_tokens:
            message = (f"This model's maximum context length is {max_context_len} tokens. However, you requested "
                       f"{num_prompt + max_tokens} tokens ({num_prompt} in the messages, {max_tokens} in the "
                       f"completion). Please reduce the length of the messages or completion. You requested "
                       f"{max_tokens} output tokens and your prompt contains at least {num_prompt} input tokens, for "
                       f"a total of at least {num_prompt + max_tokens} tokens. With this prompt, max_tokens can be "
                       f"at most {max_context_len - num_prompt}.")
        else:
            message = (f"This model's maximum context length is {max_context_len} tokens. However, your request has "
                       f"{num_prompt} input tokens. Please reduce the length of the input messages.")
        super().__init__(message)


def check_prompt(prompt_token_ids, max_tokens: int, max_context_len: int, vocab_size: int) -> None:
    """Raises InvalidRequestError for an empty prompt or out-of-vocab ids, ContextLengthError for a prompt that
    leaves no room to generate or a max_tokens (> 0) past the room it leaves."""
    num_prompt = len(prompt_token_ids)
    if num_prompt == 0:
        raise InvalidRequestError("prompt is empty: at least one token is needed")
    if num_prompt >= max_context_len:
        raise ContextLengthError(max_context_len, num_prompt)
    # Ended at the context instead, such a request looked complete ("length") with fewer tokens than it asked for.
    if max_tokens > max_context_len - num_prompt:
        raise ContextLengthError(max_context_len, num_prompt, max_tokens)
    # min / max run in C: a comprehension over a 16k-token prompt held the step loop for 0.9 ms per request.
    if vocab_size > 0 and (min(prompt_token_ids) < 0 or max(prompt_token_ids) >= vocab_size):
        bad = next(t for t in prompt_token_ids if t < 0 or t >= vocab_size)
        raise InvalidRequestError(f"prompt token id {bad} is outside the vocabulary [0, {vocab_size})")


def _f32(value: float) -> float:
    """`value` as the float32 a proto float field holds."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _check_range(name: str, value: float, low: float, high: float) -> None:
    # Sampling values arrive as float32: a bound such as 1e-9 or 0.01 that a gateway accepts arrives a hair below itself.
    if not _f32(low) <= value <= _f32(high):
        raise InvalidRequestError(f"{name}={value} is outside [{low}, {high}]")


def check_sampling(request, vocab_size: int) -> None:
    """Raises InvalidRequestError for sampling values out of range (pb.GenerateRequest `request`)."""
    sampling = request.sampling
    _check_range("temperature", sampling.temperature, 0.0, 100.0)
    if sampling.top_p != 0.0:
        _check_range("top_p", sampling.top_p, 1e-9, 1.0)
    if sampling.top_k < 0:
        raise InvalidRequestError(f"top_k={sampling.top_k} must be >= 0 (0 = off)")
    _check_range("min_p", sampling.min_p, 0.0, 1.0)
    if sampling.typical_p != 0.0:
        _check_range("typical_p", sampling.typical_p, 1e-9, 1.0)
    _check_range("presence_penalty", sampling.presence_penalty, -2.0, 2.0)
    _check_range("frequency_penalty", sampling.frequency_penalty, -2.0, 2.0)
    # Any positive penalty, as vLLM takes it (0 = unset); the gateways bound it further per API.
    _check_range("repetition_penalty", sampling.repetition_penalty, 0.0, 100.0)
    if sampling.repetition_window < 0:
        raise InvalidRequestError(f"repetition_window={sampling.repetition_window} must be >= 0 (0 = every token)")
    _check_range("num_logprobs", sampling.num_logprobs, 0, MAX_NUM_LOGPROBS)
    if sampling.prompt_logprobs:
        _check_range("num_prompt_logprobs", sampling.num_prompt_logprobs, 0, MAX_NUM_LOGPROBS)
    for token_id, bias in sampling.logit_bias.items():
        if vocab_size > 0 and not 0 <= token_id < vocab_size:
            raise InvalidRequestError(f"logit_bias token id {token_id} is outside the vocabulary [0, {vocab_size})")
        _check_range(f"logit_bias[{token_id}]", bias, -100.0, 100.0)
    outside = [t for t in sampling.allowed_token_ids if vocab_size > 0 and not 0 <= t < vocab_size]
    if outside:
        raise InvalidRequestError(f"allowed_token_ids id {outside[0]} is outside the vocabulary [0, {vocab_size})")
    if request.max_tokens < 0:
        raise InvalidRequestError(f"max_tokens={request.max_tokens} must be >= 0 (0 = until the context is full)")
    if sampling.min_tokens < 0 or (request.max_tokens and sampling.min_tokens > request.max_tokens):
        raise InvalidRequestError(f"min_tokens={sampling.min_tokens} must be >= 0 and <= max_tokens "
                                  f"({request.max_tokens})")


class StepFailedError(RequestError):
    code = "INTERNAL"
    reason = "step_failed"


class RejectedGroups:
    """The group_ids (API requests of n > 1 choices) refused lately, oldest first and bounded: requests_rejected
    counts an API request once, not once per choice."""

    def __init__(self, max_groups: int = MAX_REJECTED_GROUPS):
        self.max_groups = max_groups
        self._group_ids = OrderedDict()

    def first_refusal(self, group_id: str) -> bool:
        """Whether a refusal in `group_id` is the request's first (always true for a call of no group)."""
        if not group_id:
            return True
        if group_id in self._group_ids:
            return False
        self._group_ids[group_id] = None
        if len(self._group_ids) > self.max_groups:
            self._group_ids.popitem(last=False)
        return True
