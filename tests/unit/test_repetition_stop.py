"""Unit tests: vLLM's stop on a repeated token pattern in the scheduler (scheduler/repetition.py, step_outputs):
the check against a plain reference of vLLM's rule on random ids, and where it ends a request."""
import random

import pytest

from proto import pb
from scheduler.repetition import RepetitionStop, ends_in_repetition, repetition_stop
from scheduler.request import Request
from tests.unit.test_scheduler import make_scheduler
from tests.unit.test_scheduler_min_tokens import feed

EOS, STOP = 999, 42


def reference(ids: list, largest: int, least: int, count: int) -> bool:
    """vLLM's rule as written in vllm/v1/core/sched/utils.py check_sequence_repetition: some size L from least
    (0 = 1) to largest whose last L * count ids are count copies of the last L; off for a largest size of 0, a
    count below 2 or a least size above the largest."""
    least = max(least, 1)
    if largest <= 0 or count < 2 or least > largest:
        return False
    return any(len(ids) >= size * count and ids[-size * count:] == ids[-size:] * count
               for size in range(least, largest + 1))


def check(ids, largest, least, count) -> bool:
    stop = RepetitionStop(largest, least, count)
    return stop.active and ends_in_repetition(ids, stop)


@pytest.mark.parametrize("seed", range(6))
def test_the_check_agrees_with_vllms_rule_on_random_ids(seed):
    rng = random.Random(seed)
    for _ in range(400):
        # A few ids only, so that repeats happen by chance too; a pattern repeated at the end most of the time.
        ids = [rng.randrange(4) for _ in range(rng.randrange(0, 12))]
        pattern = [rng.randrange(4) for _ in range(rng.randrange(1, 6))]
        ids += pattern * rng.randrange(0, 5)
        largest, least, count = rng.randrange(0, 7), rng.randrange(0, 7), rng.randrange(0, 5)
        assert check(ids, largest, least, count) == reference(ids, largest, least, count), (ids, largest, least, count)


@pytest.mark.parametrize("size", range(1, 7))
@pytest.mark.parametrize("count", [2, 3, 5])
def test_a_pattern_at_the_end_is_found_at_its_count_and_not_below(size, count):
    rng = random.Random(size * 10 + count)
    # Distinct ids: the pattern has no shorter period, and the prefix (ids >= 100) never continues it.
    pattern = rng.sample(range(50), size)
    prefix = [100 + rng.randrange(50) for _ in range(5)]
    for largest, least in [(size, size), (6, 1), (size, 0), (size + 2, size)]:
        assert check(prefix + pattern * count, largest, least, count)
        assert not check(prefix + pattern * (count - 1), largest, least, count)
        assert not check(prefix + pattern * count + [7777], largest, least, count)
    # Sizes that leave the pattern's out of range never find it.
    assert not check(prefix + pattern * count, size - 1, 0, count)


def test_a_request_is_off_where_vllms_check_cannot_fire():
    assert repetition_stop(pb.GenerateRequest()) is None
    assert repetition_stop(pb.GenerateRequest(max_repetition_pattern_size=4, repetition_min_count=1)) is None
    assert repetition_stop(pb.GenerateRequest(max_repetition_pattern_size=2, min_repetition_pattern_size=3,
                                              repetition_min_count=3)) is None
    # vLLM skips a scan of (sizes x count) past 655360.
    assert repetition_stop(pb.GenerateRequest(max_repetition_pattern_size=65536, repetition_min_count=11)) is None
    assert repetition_stop(pb.GenerateRequest(max_repetition_pattern_size=4, repetition_min_count=3)) == \
        RepetitionStop(4, 0, 3)


def repeat_request(min_tokens=0, max_tokens=20, stop=RepetitionStop(2, 1, 3)):
    return Request("r", [1, 2, 3], pb.SamplingParams(min_tokens=min_tokens), max_tokens,
                   stop_token_ids=frozenset({STOP}), eos_token_ids=frozenset({EOS}), repetition_stop=stop)


@pytest.mark.parametrize("min_tokens,tokens,ends_at", [
    (0, [5, 6, 5, 6, 5, 6, 5], 6),        # [5, 6] three times: the 6th token ends it
    (0, [5, 7, 7, 7, 8], 4),              # [7] three times
    (7, [5, 6, 5, 6, 5, 6, 5, 6], 7),     # held off until the min_tokens-th token, as vLLM's check_stop
])
def test_the_scheduler_ends_a_request_on_its_repetition(min_tokens, tokens, ends_at):
    sched = make_scheduler()
    sched.add_request(repeat_request(min_tokens))
    outputs = feed(sched, tokens)
    assert [o.finish_reason for o in outputs] == [""] * (ends_at - 1) + ["repetition"]
    # The token that completed the pattern is output (it is no stop id), and counted.
    assert [t for o in outputs for t in o.token_ids] == tokens[:ends_at]
    assert not sched.has_work()
    sched.self_check()


def test_eos_stop_ids_and_max_tokens_come_before_the_repetition():
    for last, reason in [(EOS, "stop"), (STOP, "stop")]:
        sched = make_scheduler()
        sched.add_request(repeat_request(stop=RepetitionStop(1, 1, 2)))
        outputs = feed(sched, [last, last])
        assert outputs[0].finish_reason == reason
    sched = make_scheduler()
    sched.add_request(repeat_request(max_tokens=3))
    outputs = feed(sched, [5, 5, 5])
    assert [o.finish_reason for o in outputs] == ["", "", "length"]


def test_without_it_a_repeating_output_runs_to_its_limit():
    sched = make_scheduler()
    sched.add_request(repeat_request(max_tokens=8, stop=None))
    outputs = feed(sched, [5] * 8)
    assert [o.finish_reason for o in outputs] == [""] * 7 + ["length"]


class CountingIds(list):
    """A list that counts the ids its slices copy."""
    copied = 0

    def __getitem__(self, index):
        item = super().__getitem__(index)
        if isinstance(index, slice):
            CountingIds.copied += len(item)
        return item


def test_a_long_output_is_checked_without_copying_it_per_size():
    # 20000 varied ids, every size up to 65536 asked for: one comparison rules each size out. Before, each size
    # copied its tail (134 ms a token, every token, in the scheduler's loop).
    rng = random.Random(0)
    ids = CountingIds(rng.randrange(50000) for _ in range(20000))
    ids[-1] = 50001     # no earlier id matches the last: every size is ruled out at once
    CountingIds.copied = 0
    assert not ends_in_repetition(ids, RepetitionStop(65536, 1, 2)) and CountingIds.copied == 0
