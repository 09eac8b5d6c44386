"""Scheduler process: vLLM's stop on a repeated token pattern (max_repetition_pattern_size,
min_repetition_pattern_size, repetition_min_count), checked after each generated token. Pure Python."""
from typing import NamedTuple

from proto.repetition_bounds import MAX_PATTERN_SIZE


class RepetitionStop(NamedTuple):
    """A request's pattern sizes and count (GenerateRequest fields 11-13)."""

    max_size: int
    min_size: int
    min_count: int

    @property
    def active(self) -> bool:
        """The check can fire: where vLLM's check_sequence_repetition (vllm/v1/core/sched/utils.py) returns False
        whatever the tokens (size 0, a count below 2, the least size (0 = 1) above the largest), it is off."""
        least = max(self.min_size, 1)
        if self.max_size <= 0 or self.min_count < 2 or least > self.max_size or self.max_size > MAX_PATTERN_SIZE:
            return False
        # vLLM skips a check whose scan would be too long (sizes x count past ten times the largest size allowed).
        return (self.max_size - least + 1) * self.min_count <= MAX_PATTERN_SIZE * 10


def ends_in_repetition(token_ids: list, stop: RepetitionStop) -> bool:
    """True when token_ids end in min_count back-to-back copies of one pattern of min_size..max_size tokens (the
    sizes tried smallest first, stopping at the first that needs more tokens than there are), as vLLM's
    check_sequence_repetition decides; its caller ends the request with finish_reason "repetition"."""
    num_tokens, count = len(token_ids), stop.min_count
    for size in range(max(stop.min_size, 1), stop.max_size + 1):
        if size * count > num_tokens:
            return False
        # One comparison rules most sizes out, before any slice is copied (a long output with a large largest size
        # would otherwise copy up to num_tokens / count ids per size, every token).
        if token_ids[-1] != token_ids[-1 - size]:
            continue
        tail = token_ids[num_tokens - size:]
        if all(token_ids[num_tokens - size * (m + 1):num_tokens - size * m] == tail for m in range(1, count)):
            return True
    return False


def repetition_stop(request) -> "RepetitionStop | None":
    """A pb.GenerateRequest's RepetitionStop, None when it is off (the default) or cannot fire."""
    stop = RepetitionStop(request.max_repetition_pattern_size, request.min_repetition_pattern_size,
                          request.repetition_min_count)
    return stop if stop.active else None
