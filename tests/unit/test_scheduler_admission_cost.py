"""Unit tests: admitting a request costs the same with hundreds already queued (no scan of every stream)."""
import pytest

from scheduler.admission import QueueFullError
from tests.unit.test_scheduler_engine import make_engine, request


def count_group_reads(engine) -> list:
    """Makes every admitted stream count the reads of its group_id; returns the one-element counter."""
    reads = [0]
    for stream in engine.streams.values():
        stream.__class__ = type("Counted", (type(stream),), {
            "group_id": property(lambda self: reads.__setitem__(0, reads[0] + 1) or self.__dict__["group_id"])})
    return reads


@pytest.mark.parametrize("max_queue_depth", [0, 5], ids=["unlimited", "depth-5"])
async def test_a_burst_is_admitted_without_reading_every_waiting_stream(max_queue_depth):
    """A burst of 2000 requests (each its own group_id, as the gateway sends them) spent 1.08 s of the scheduler's
    loop in submit: each one scanned every admitted stream for its group and counted every waiting one for the queue
    depth, also with no depth set (O(n^2): 0.09 s for 500). A new request now reads no other stream with no depth
    set, and at most about the depth's worth of the queue with one."""
    engine, link = await make_engine(max_queue_depth=max_queue_depth, max_num_seqs=4)
    link.auto = False
    num_admitted = 300 if max_queue_depth == 0 else 4 + max_queue_depth
    for i in range(num_admitted):
        engine.submit(request(f"r{i}", group_id=f"r{i}"))
    reads = count_group_reads(engine)
    if max_queue_depth:
        with pytest.raises(QueueFullError):
            engine.submit(request("refused", group_id="refused"))
        assert reads[0] <= max_queue_depth
    else:
        engine.submit(request("more", group_id="more"))
        assert reads[0] == 0
    # Another choice of an admitted request is still known as one (never refused, even past the depth).
    engine.submit(request("r3-1", group_id="r3"))
    assert "r3-1" in engine.streams
    await engine.stop()


@pytest.mark.parametrize("bad", [-1, 1000, 5000])
def test_the_prompt_check_names_the_first_id_outside_the_vocabulary(bad):
    """check_prompt reads a valid prompt with min / max (C) instead of a comprehension (0.9 ms of the step loop per
    16k-token prompt: bench/scheduler_host.py); the error still names the first id outside [0, vocab)."""
    from scheduler.admission import InvalidRequestError, check_prompt
    check_prompt(list(range(1000)) * 16, 0, 32768, 1000)
    prompt = [5] * 16000 + [bad, 7000, -3]
    with pytest.raises(InvalidRequestError, match=rf"prompt token id {bad} is outside the vocabulary \[0, 1000\)"):
        check_prompt(prompt, 0, 32768, 1000)
