"""Unit tests: fairness under mixed load, the scheduler and engine driven by hand (no sockets, no sleeps)."""
import pytest

from scheduler.admission import QueueFullError
from scheduler.scheduler import SchedulerLimits
from tests.unit.test_scheduler import FakeWorker, make_request, make_scheduler, run_to_end
from tests.unit.test_scheduler_engine import make_engine, request


def rows_of(step) -> dict:
    return {row.req_id: row.num_tokens for row in step.rows}


def test_short_prompt_prefills_beside_a_chunked_long_prompt():
    """vLLM #21495: a short prompt behind a long one waited for the whole long prefill (TTFT = long TTFT). It now
    takes part of each step's budget; the long prompt still advances at least half the budget every step."""
    sched, worker = make_scheduler(max_tokens_per_step=64), FakeWorker()
    sched.add_request(make_request("long", 2000, max_tokens=2))
    sched.update(worker.run(sched.schedule()))
    sched.add_request(make_request("short", 5, max_tokens=3, seed=1))
    step = sched.schedule()
    assert rows_of(step) == {"long": 59, "short": 5}
    first_token = {out.req_id for out in sched.update(worker.run(step)) if out.token_ids}
    assert first_token == {"short"}
    for _ in range(3):
        step = sched.schedule()
        assert rows_of(step)["long"] >= 32
        sched.update(worker.run(step))
    tokens, _ = run_to_end(sched, worker)
    assert len(tokens["long"]) == 2


def test_waiting_long_prompts_share_with_the_running_one_fcfs():
    """Two long prompts: the second is admitted beside the first (half the budget), in arrival order."""
    sched, worker = make_scheduler(max_tokens_per_step=64), FakeWorker()
    for i in range(3):
        sched.add_request(make_request(f"long{i}", 500, max_tokens=1, seed=i))
    admitted = []
    for _ in range(100):
        step = sched.schedule()
        if step is None:
            break
        admitted += [new.req_id for new in step.new_requests]
        assert sum(row.num_tokens for row in step.rows) <= 64
        sched.update(worker.run(step))
    assert admitted == ["long0", "long1", "long2"] and not sched.has_work()


@pytest.mark.parametrize("max_num_seqs", [8, 64], ids=["seqs-8", "seqs-64"])
def test_every_running_decode_gets_a_row_when_the_budget_is_below_max_num_seqs(max_num_seqs):
    """Budget 4 tokens, more seats than that: the youngest decodes got no row for as long as the older ones ran
    (ITL = the whole generation). Running requests are capped at the budget, so every decode runs every step."""
    sched, worker = make_scheduler(max_tokens_per_step=4, max_num_seqs=max_num_seqs), FakeWorker()
    assert sched.limits.max_num_seqs == 4 and SchedulerLimits(4, 8).max_num_seqs == 4
    for i in range(6):
        sched.add_request(make_request(f"r{i}", 1, max_tokens=40, seed=i))
    for _ in range(10):
        step = sched.schedule()
        decoding = [r.req_id for r in sched.running if r.output_token_ids]
        assert set(decoding) <= set(rows_of(step))
        sched.update(worker.run(step))
    tokens, reasons = run_to_end(sched, worker)
    assert sorted(reasons) == [f"r{i}" for i in range(6)]


async def test_requests_that_a_free_seat_takes_do_not_count_as_queued():
    """A burst on an idle server (4 seats, depth 1): the 2nd..4th request got 429 although a seat was free; now
    the ones the next step seats are admitted, one more waits, the next is refused."""
    engine, link = await make_engine(max_queue_depth=1, max_num_seqs=4)
    link.auto = False
    for i in range(5):
        engine.submit(request(f"r{i}"))
    with pytest.raises(QueueFullError):
        engine.submit(request("r5"))
    await engine.stop()


async def test_waiting_choices_of_one_api_request_count_once_for_the_depth():
    """An n = 3 request waiting counted as 3 queued requests: a lone request behind it got 429 at depth 2."""
    engine, link = await make_engine(max_queue_depth=2, max_num_seqs=1)
    link.auto = False
    engine.submit(request("seated"))
    for i in range(3):
        engine.submit(request(f"cmpl-1-{i}", group_id="cmpl-1"))
    engine.submit(request("lone"))
    with pytest.raises(QueueFullError):
        engine.submit(request("refused"))
    await engine.stop()


def test_a_prefill_takes_the_whole_budget_while_the_waiting_request_cannot_fit_the_kv_pool():
    """The half-budget reserve is for a request that can be seated this step. One that waits for KV blocks (here
    until the 500-token prompt is done: 40 blocks of 16) left that half unused every step: the long prompt's first
    token took 15 steps instead of 8. Once it fits, the reserve is back (the short prompt beside the long one, above)."""
    def steps_to_first_token(waiting: bool) -> int:
        sched, worker = make_scheduler(num_blocks=40, max_tokens_per_step=64), FakeWorker()
        sched.add_request(make_request("long", 500, max_tokens=4))
        if waiting:
            sched.add_request(make_request("w", 300, max_tokens=4, seed=1))
        for n in range(1, 100):
            step = sched.schedule()
            assert "w" not in rows_of(step)
            if any(out.req_id == "long" and out.token_ids for out in sched.update(worker.run(step))):
                return n
    assert steps_to_first_token(waiting=True) == steps_to_first_token(waiting=False) == 8
