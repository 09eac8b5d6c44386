"""A waiting request whose prompt hits the prefix cache, while every GDN state slot is held by running requests and
that one entry: the entry gives its slot up and the request starts cold at once, as a request that misses does (the
others gave way to it). The entry it would have read was the one slot admission never freed, so a hit waited for a
running request to finish (499 steps behind a 500-token answer, a seat free all along, no lookahead steps meanwhile)
while a miss ran at once. vLLM never lets its cache hold a request back: a block only the cache holds is free to any
request (vllm/v1/core/block_pool.py get_new_blocks evicts it)."""
from tests.unit.test_prefix_cache import FakeWorker, cached_lengths, chat, filler, make_scheduler, reference, request
from tests.unit.test_prefix_cache import serve
from tests.unit.test_scheduler_lookahead import run_with_lookahead


def test_a_hit_on_the_entry_that_holds_the_last_slot_starts_cold_at_once():
    sched, worker = make_scheduler(num_slots=2), FakeWorker()
    first = chat(1, 70)
    serve(sched, worker, "a", first)
    assert cached_lengths(sched) == [80]
    sched.add_request(request("long", filler(3, 40), max_tokens=500))
    sched.update(worker.run(sched.schedule()))
    assert sched.state_pool.num_free_slots == 0
    second = first + [5, 6, 7]
    b = request("b", second)
    sched.add_request(b)
    step = sched.schedule()
    assert [row.req_id for row in step.rows] == ["long", "b"] and not step.restore_states
    assert b.num_cached_tokens == 0 and cached_lengths(sched) == []
    tokens = {}
    while step is not None:
        for out in sched.update(worker.run(step)):
            tokens.setdefault(out.req_id, []).extend(out.token_ids)
        step = sched.schedule()
    assert tokens["b"] == reference(second)


def test_a_head_whose_prefix_hit_fits_the_kv_pool_stops_the_lookahead():
    """A waiting request whose prompt shares 14 blocks with the running answer that hit the same cached system prompt
    needs 2 new blocks, and 14 are free. Counted as if it needed its whole prompt anew, it did not fit the KV pool, so
    the decode steps went on planned ahead and it waited 228 steps, until that answer was done; vLLM's scheduler
    counts a hit's blocks as computed, not to allocate (vllm/v1/core/sched/scheduler.py: get_computed_blocks, then
    allocate_slots for the rest)."""
    sched, worker = make_scheduler(num_blocks=30), FakeWorker()
    serve(sched, worker, "seed", chat(1, 200))
    sched.add_request(request("a", chat(1, 200, (30,)), max_tokens=300))
    b = request("b", chat(1, 200, (25,)), max_tokens=4)
    admitted = []

    def before_step(n: int) -> None:
        if n == 20:
            sched.add_request(b)
        if b.num_computed_tokens and not admitted:
            admitted.append(n)
    tokens, _, _ = run_with_lookahead(sched, worker, before_step=before_step)
    # Added in round 20 beside the step planned ahead then, seated by the next step planned (seen from round 22 on).
    assert admitted == [22] and b.num_cached_tokens > 0
    assert tokens["b"] == reference(b.prompt_token_ids, 4)
