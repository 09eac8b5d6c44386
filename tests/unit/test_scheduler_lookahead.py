"""Asynchronous scheduling (scheduler/lookahead.py): the next decode step planned while the worker runs this one.

FakeWorker (tests/unit/test_scheduler.py) hashes every token it is fed per slot and samples from the hash, and feeds
a previous_token row the token it sampled for that request in the step it ran last, so a wrong placeholder, context
length or slot changes every later token."""
import asyncio

from scheduler import lookahead
from tests.unit.test_scheduler import FakeWorker, make_request, make_scheduler, run_to_end
from tests.unit.test_scheduler_engine import drain, make_engine, request


def run_with_lookahead(sched, worker, max_steps=10_000, before_step=None, ahead=True):
    """Like run_to_end, but every step with a lookahead behind it is followed by that lookahead before its result
    is applied (two steps in flight, as the engine does; none with `ahead` False). `before_step(n)` runs first in
    the n-th round (requests added or aborted there, maybe with steps in flight). Returns tokens, reasons and the
    lookahead count."""
    tokens, reasons, num_ahead = {}, {}, 0
    inflight = []
    for n in range(max_steps):
        if before_step:
            before_step(n)
        if not inflight:
            step = sched.schedule()
            if step is None:
                break
            inflight.append((step, worker.run(step)))
        if len(inflight) == 1 and ahead:
            planned = lookahead.plan(sched, inflight[0][0])
            if planned is not None:
                num_ahead += 1
                inflight.append((planned, worker.run(planned)))
        _, result = inflight.pop(0)
        for out in sched.update(result):
            tokens.setdefault(out.req_id, []).extend(out.token_ids)
            if out.finish_reason:
                reasons[out.req_id] = out.finish_reason
    assert not sched.has_work() and not inflight
    return tokens, reasons, num_ahead


def _requests(sched, stop=frozenset()):
    for i in range(5):
        sched.add_request(make_request(f"r{i}", 20 + 9 * i, max_tokens=6 + 5 * i, seed=i, stop_token_ids=stop))


def test_lookahead_gives_the_synchronous_tokens():
    want = run_to_end(*_ready(), max_steps=10_000)
    got_tokens, got_reasons, num_ahead = run_with_lookahead(*_ready())
    assert (got_tokens, got_reasons) == want
    assert num_ahead >= 20  # the steady state was planned ahead, not skipped


def _ready(stop=frozenset()):
    sched = make_scheduler(max_tokens_per_step=64)
    _requests(sched, stop)
    return sched, FakeWorker()


def test_a_request_that_stops_in_the_step_in_flight_loses_only_its_extra_token():
    # stop on tokens the fake model does sample: requests end early, with a lookahead row already in flight
    sched, worker = _ready()
    sample = run_to_end(sched, worker)[0]
    stop = frozenset(tokens[2] for tokens in sample.values())
    want = run_to_end(*_ready(stop))
    sched, worker = _ready(stop)
    got_tokens, got_reasons, num_ahead = run_with_lookahead(sched, worker)
    assert (got_tokens, got_reasons) == want and num_ahead > 0
    assert "stop" in got_reasons.values()
    assert sched.block_manager.num_free_blocks == sched.block_manager.num_total_blocks
    assert sched.state_pool.num_free_slots == sched.state_pool.num_total_slots


def test_lookahead_rows_continue_the_step_in_flight():
    sched = make_scheduler()
    sched.add_request(make_request("a", 30, max_tokens=10))
    sched.add_request(make_request("b", 17, max_tokens=2))  # samples its last token in the next step
    worker = FakeWorker()
    sched.update(worker.run(sched.schedule()))  # prefill: both sample their first token
    step = sched.schedule()
    ahead = lookahead.plan(sched, step)
    assert [row.req_id for row in ahead.rows] == ["a"]  # b reaches max_tokens in `step`: no row for it
    row = ahead.rows[0]
    assert row.previous_token and row.sample and row.num_tokens == 1 and list(ahead.token_ids) == [-1]
    assert row.context_len == 31 and ahead.step_id == step.step_id + 1
    worker.run(step)
    worker.run(ahead)
    assert len(worker.tables.table(row.state_slot)) * 16 >= 32


def test_a_request_that_ended_leaves_the_others_planned_ahead():
    sched = make_scheduler()
    for i in range(3):
        sched.add_request(make_request(f"r{i}", 12 + i, max_tokens=20, seed=i))
    worker = FakeWorker()
    sched.update(worker.run(sched.schedule()))
    step = sched.schedule()
    ahead = lookahead.plan(sched, step)
    sched.abort("r1")  # e.g. its client left, or a stop string, while both steps are in flight
    sched.update(worker.run(step))
    nxt = lookahead.plan(sched, ahead)  # from the step still in flight, which has a row for r1
    assert nxt is not None and [row.req_id for row in nxt.rows] == ["r0", "r2"]
    assert list(nxt.finished_req_ids) == ["r1"]
    sched.update(worker.run(ahead))
    sched.update(worker.run(nxt))


def test_no_lookahead_while_a_request_waits_for_a_free_seat_or_prefills():
    sched = make_scheduler(max_tokens_per_step=64, max_num_seqs=2)
    sched.add_request(make_request("a", 10, max_tokens=10))
    worker = FakeWorker()
    step = sched.schedule()
    sched.add_request(make_request("b", 10, max_tokens=10))
    assert lookahead.plan(sched, step) is None  # b waits, and a seat is free for it at the next step
    sched.update(worker.run(step))
    sched = make_scheduler(max_tokens_per_step=64)
    sched.add_request(make_request("long", 200, max_tokens=4))
    step = sched.schedule()
    assert not step.rows[0].sample and lookahead.plan(sched, step) is None  # mid-prefill: no sampled token


def test_a_queue_behind_full_seats_keeps_planning_ahead():
    """A saturated server: every seat taken, more requests waiting. Each step was planned only after the one before
    came back (no lookahead while anything waited), the worker idle in between, exactly under load. The waiting
    requests are still seated as seats free, with the tokens of a synchronous run."""
    def ready():
        sched = make_scheduler(max_tokens_per_step=64, max_num_seqs=2)
        for i in range(5):
            sched.add_request(make_request(f"r{i}", 8 + i, max_tokens=12 + 3 * i, seed=i))
        return sched, FakeWorker()

    want = run_to_end(*ready())
    got_tokens, got_reasons, num_ahead = run_with_lookahead(*ready())
    assert (got_tokens, got_reasons) == want
    assert num_ahead >= 40


def test_no_lookahead_when_a_block_table_cannot_grow():
    sched = make_scheduler(num_blocks=4)  # 64 tokens of KV in all
    sched.add_request(make_request("b", 3, max_tokens=8, seed=1))
    sched.add_request(make_request("a", 31, max_tokens=8))
    worker = FakeWorker()
    sched.update(worker.run(sched.schedule()))  # b holds 1 block, a 2
    assert sched.block_manager.grow([], 16)  # the last free block goes to another holder: none free
    step = sched.schedule()  # b decodes position 3; a position 31, the end of its second block
    computed = [sched.requests[r].num_computed_tokens for r in ("a", "b")]
    assert lookahead.plan(sched, step) is None  # a's position 32 needs a fifth block; b's row is undone
    assert [sched.requests[r].num_computed_tokens for r in ("a", "b")] == computed
    sched.update(worker.run(step))


async def test_engine_plans_ahead_and_streams_the_synchronous_tokens():
    results = {}
    for on in (0, 1):
        engine, link = await make_engine(async_scheduling=on)
        streams = [engine.submit(request(f"r{i}", 5 + 3 * i, max_tokens=12)) for i in range(3)]
        results[on] = [await drain(s) for s in streams]
        steps = [m.step for m in link.sent if m.WhichOneof("kind") == "step"]
        ahead = [s for s in steps if any(row.previous_token for row in s.rows)]
        assert bool(ahead) == bool(on)
        await engine.stop()
    assert [t for t, _ in results[1]] == [t for t, _ in results[0]]
    assert all(len(t) == 12 and last.finish_reason == "length" for t, last in results[1])
    await asyncio.sleep(0)


def test_a_request_waiting_for_kv_blocks_leaves_the_decode_steps_planned_ahead():
    """A 400-token prompt that the 40-block pool holds only once the two 300-token answers are done: a seat was free,
    so every step ran synchronously while it waited (3 steps planned ahead instead of 199)."""
    def ready():
        sched = make_scheduler(num_blocks=40, max_tokens_per_step=64)
        sched.add_request(make_request("a", 100, max_tokens=200))
        sched.add_request(make_request("b", 100, max_tokens=200, seed=2))
        sched.add_request(make_request("w", 400, max_tokens=4, seed=1))
        return sched, FakeWorker()
    want = run_to_end(*ready(), max_steps=10_000)
    got_tokens, got_reasons, num_ahead = run_with_lookahead(*ready())
    assert (got_tokens, got_reasons) == want and len(got_tokens["w"]) == 4
    assert num_ahead >= 190
