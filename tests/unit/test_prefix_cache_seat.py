"""A waiting request whose prompt hits the prefix cache, while every GDN state slot is held by running requests and
that one entry: the entry gives its slot up and the request starts cold at once, as a request that misses does (the
others gave way to it). The entry it would have read was the one slot admission never freed, so a hit waited for a
running request to finish (499 steps behind a 500-token answer, a seat free all along, no lookahead steps meanwhile)
while a miss ran at once. vLLM never lets its cache hold a request back: a block only the cache holds is free to any
request (vllm/v1/core/block_pool.py get_new_blocks evicts it)."""
from tests.unit.test_prefix_cache import FakeWorker, cached_lengths, chat, filler, make_scheduler, reference, request
from tests.unit.test_prefix_cache import serve


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
