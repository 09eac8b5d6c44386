"""Unit tests: a long prompt among a steady stream of short requests is served, not starved (driven by hand)."""
from tests.unit.test_scheduler import FakeWorker, make_request, make_scheduler

NUM_SHORT = 6


def _stream_until_done(num_blocks: int, max_steps: int = 3000) -> tuple:
    """NUM_SHORT short requests (50 + 40 tokens) kept in flight, each replaced as it ends; after 5 steps a prompt of
    1000 tokens (4 generated) joins. Returns (the step the long one finished at or None, its preemptions, shorts
    finished)."""
    sched, worker = make_scheduler(num_blocks=num_blocks, max_tokens_per_step=256), FakeWorker()
    num_short = 0

    def add_short():
        nonlocal num_short
        sched.add_request(make_request(f"s{num_short}", 50, max_tokens=40, seed=num_short + 1))
        num_short += 1
    for _ in range(NUM_SHORT):
        add_short()
    long_req = None
    for step_index in range(max_steps):
        if step_index == 5:
            long_req = make_request("long", 1000, max_tokens=4)
            sched.add_request(long_req)
        step = sched.schedule()
        for out in sched.update(worker.run(step)) if step is not None else ():
            if out.finish_reason and out.req_id == "long":
                return step_index, long_req.num_preemptions, num_short - NUM_SHORT
            if out.finish_reason:
                add_short()
    return None, long_req.num_preemptions, num_short - NUM_SHORT


def test_a_long_prompt_is_not_starved_by_short_requests_admitted_behind_it():
    """A 1000-token prompt in a 64-block (1024-token) pool is admitted once its whole prompt fits, but the short
    requests queued behind it were admitted on the blocks its later prefill chunks were to take; their decodes,
    scheduled first in each step, made it preempt itself, and it went back to the queue's front to wait for the pool
    to drain again: never served while short requests kept coming (on a stack: 60 s and counting, 176 short ones
    served). The blocks an admitted prompt still needs are kept for it: it finishes, preempted at most once."""
    done_at, num_preemptions, num_short_done = _stream_until_done(num_blocks=64)
    assert done_at is not None, f"not finished; preempted {num_preemptions} times, {num_short_done} short ones served"
    assert num_preemptions <= 1


def test_the_short_requests_keep_flowing_around_a_long_prompt():
    """With room for both (a 4096-token pool) the long prompt never waits for the short ones nor stops them."""
    done_at, num_preemptions, num_short_done = _stream_until_done(num_blocks=256)
    assert done_at is not None and done_at < 20 and num_preemptions == 0
