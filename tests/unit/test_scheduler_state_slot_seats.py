"""The seats of a server whose worker has fewer GDN state slots than SPARKINFER_MAX_NUM_SEQS: each running request
holds a slot, so the slots are the seats, as SGLang caps max_running_requests by its mamba state pool
(python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py init_memory).

Measured on make run with SPARKINFER_NUM_STATE_SLOTS=2 and SPARKINFER_MAX_QUEUE_DEPTH=2 (max_num_seqs 64): ten
requests at once were all admitted, 2 running and 8 waiting, never a 429, since the depth counted only the requests
past 64 - 2 free seats; GET /slots listed 64 seats with 10 busy and ?fail_on_no_slot=1 answered 200, /props
total_slots 64; and the running prefills got half the step budget while the queue waited for a seat no step gave."""
import asyncio

from scheduler import lookahead
from scheduler.admission import QueueFullError, check_queue_depth, num_queued_requests
from scheduler.streams import Streams
from tests.unit.test_scheduler import FakeWorker, make_request, make_scheduler
from tests.unit.test_scheduler_engine import make_engine, request

import pytest


async def test_the_queue_depth_counts_the_requests_past_the_state_slots():
    # The fake worker's hello has 4 state slots; max_num_seqs is 64.
    engine, _ = await make_engine(max_queue_depth=2)
    try:
        for i in range(6):
            engine.submit(request(f"r{i}", max_tokens=50))
        assert engine.load().max_num_seqs == 4
        with pytest.raises(QueueFullError, match="queue full: 2 requests waiting"):
            engine.submit(request("r6", max_tokens=50))
    finally:
        for i in range(6):
            engine.cancel(f"r{i}")
        await engine.stop()


def test_requests_waiting_for_a_slot_leave_the_decode_steps_planned_ahead():
    sched, worker = make_scheduler(num_slots=2, max_num_seqs=16, max_tokens_per_step=64), FakeWorker()
    for i in range(3):
        sched.add_request(make_request(f"r{i}", 8, max_tokens=20))
    for _ in range(3):
        step = sched.schedule()
        sched.update(worker.run(step))
    assert [r.req_id for r in sched.running] == ["r0", "r1"] and len(sched.waiting) == 1
    assert all(r.is_decoding for r in sched.running)
    step = sched.schedule()
    ahead = lookahead.plan(sched, step)
    assert ahead is not None and [row.req_id for row in ahead.rows] == ["r0", "r1"]


def test_a_running_prefill_gets_the_whole_budget_while_the_queue_waits_for_a_slot():
    sched = make_scheduler(num_slots=1, max_num_seqs=16, max_tokens_per_step=64)
    sched.add_request(make_request("long", 300, max_tokens=5))
    sched.add_request(make_request("next", 40, max_tokens=5))
    first = sched.schedule()
    assert [row.num_tokens for row in first.rows] == [64]
    second = sched.schedule()
    assert [(row.req_id, row.num_tokens) for row in second.rows] == [("long", 64)]


def test_the_queue_depth_counts_the_requests_the_kv_pool_cannot_take_yet():
    """A seat is free but the KV pool holds the first waiting request only once the running one is done: no step
    seats it, so it waits as one with no seat does. Measured on make run (30 KV blocks, SPARKINFER_MAX_NUM_SEQS=16,
    SPARKINFER_MAX_QUEUE_DEPTH=2): ten 300-token prompts, 1 running and 9 waiting, never a 429."""
    sched = make_scheduler(num_blocks=64, max_num_seqs=16, max_tokens_per_step=1024)
    sched.add_request(make_request("r0", 700, max_tokens=300))
    sched.update(FakeWorker().run(sched.schedule()))
    for i in (1, 2):
        sched.add_request(make_request(f"r{i}", 400, max_tokens=10, seed=i))
    assert sched.num_running == 1 and not sched.head_fits()
    assert num_queued_requests(sched, Streams(), 0) == 2
    with pytest.raises(QueueFullError):
        check_queue_depth(num_queued_requests(sched, Streams(), 2), 2)
