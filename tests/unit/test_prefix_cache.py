"""Unit tests: the prefix cache in the scheduler, driven by hand-made StepResults (no sockets, no torch)."""
import random

import pytest

from proto import pb
from scheduler.prefix_cache import PrefixCacheConfig, plan_checkpoints
from scheduler.request import RUNNING, Request
from scheduler.scheduler import Scheduler, SchedulerLimits
from tests.unit.test_scheduler import BLOCK, FakeWorker, run_to_end

ANCHOR = 900          # stands for <|im_start|>; filler tokens stay below it


def filler(seed: int, length: int) -> list:
    return [(seed * 7919 + i * 31) % 800 for i in range(length)]


def chat(seed: int, system_len: int, turn_lens=(20,)) -> list:
    """system prompt, then one anchored turn per length, then an anchored assistant header (3 tokens)."""
    tokens = filler(seed, system_len)
    for i, n in enumerate(turn_lens):
        tokens += [ANCHOR] + filler(seed * 13 + i + 1, n)
    return tokens + [ANCHOR, 801, 802]


def make_scheduler(num_blocks=256, num_slots=16, budget=256, entries=8, min_tokens=32, enabled=True):
    config = PrefixCacheConfig(enabled, entries, min_tokens, ANCHOR)
    return Scheduler(SchedulerLimits(budget, 16), num_blocks, BLOCK, num_slots, 4096, prefix_cache=config)


def request(req_id: str, prompt: list, max_tokens=6) -> Request:
    return Request(req_id, list(prompt), pb.SamplingParams(), max_tokens)


def serve(sched, worker, req_id, prompt, max_tokens=6, on_step=None) -> list:
    req = request(req_id, prompt, max_tokens)
    sched.add_request(req)
    tokens, _ = run_to_end(sched, worker, on_step=on_step)
    return tokens[req_id], req


def reference(prompt, max_tokens=6) -> list:
    """The same request with the cache off (FakeWorker tokens hash the whole sequence: chunking is invisible)."""
    return serve(make_scheduler(enabled=False), FakeWorker(), "ref", prompt, max_tokens)[0]


def cached_lengths(sched) -> list:
    return [e.num_tokens for e in sched.prefix_cache.entries.values()]


def test_plan_rounds_anchors_down_to_blocks_past_min_tokens():
    prompt = filler(1, 100)
    for pos in (10, 40, 70, 75, 97):
        prompt[pos] = ANCHOR
    splits, snapshots = plan_checkpoints(prompt, ANCHOR, 32, 16)
    assert splits == [32, 64, 96] and snapshots == (32, 96)
    assert plan_checkpoints(prompt, ANCHOR, 80, 16) == ([96], (96,))
    assert plan_checkpoints(prompt, -1, 0, 16) == ([], ())
    # an anchor in the first block never makes a checkpoint: there would be nothing to cache
    assert plan_checkpoints([ANCHOR] + filler(2, 40), ANCHOR, 0, 16) == ([], ())


def test_hit_shares_blocks_restores_state_and_matches_a_cold_run():
    sched, worker = make_scheduler(), FakeWorker()
    first = chat(1, 70)                                   # anchors at 70 and 91 -> checkpoints 64 and 80
    tokens, req = serve(sched, worker, "a", first)
    assert tokens == reference(first) and req.num_cached_tokens == 0
    assert cached_lengths(sched) == [64, 80]
    second = first + [5, 6, 7]
    steps = []
    tokens, req = serve(sched, worker, "b", second, on_step=steps.append)
    assert tokens == reference(second)
    assert req.num_cached_tokens == 80
    restore = steps[0].restore_states
    assert len(restore) == 1 and steps[0].rows[0].context_len == 80
    entry80 = next(e for e in sched.prefix_cache.entries.values() if e.num_tokens == 80)
    assert (restore[0].src_slot, restore[0].dst_slot) == (entry80.slot, steps[0].rows[0].state_slot)
    stats = sched.prefix_cache.stats
    assert (stats.num_query_tokens, stats.num_hit_tokens) == (len(first) + len(second), 80)
    sched.self_check()


def test_shared_blocks_are_refcounted_while_the_hit_runs():
    sched, worker = make_scheduler(), FakeWorker()
    prompt = chat(2, 70)
    serve(sched, worker, "a", prompt)
    sched.add_request(request("b", prompt + [1, 2]))
    sched.schedule()
    req = sched.requests["b"]
    entry = sched.prefix_cache.lookup(prompt + [1, 2])
    shared = req.block_ids[:entry.num_tokens // BLOCK]
    assert shared == entry.block_ids
    # the 64-token entry and the 80-token entry hold the first 4 blocks, the request holds them too
    assert [sched.block_manager.refcount(b) for b in shared] == [3, 3, 3, 3, 2]
    sched.abort("b")
    assert [sched.block_manager.refcount(b) for b in shared] == [2, 2, 2, 2, 1]
    sched.self_check()


def test_clear_while_a_hit_runs_keeps_its_blocks_and_leaks_nothing():
    # ResetPrefixCache (vLLM's /reset_prefix_cache, SGLang's /flush_cache) may come while a request that hit an entry
    # is in flight: the entries go, the request keeps its own references and ends as a cold run would.
    sched, worker = make_scheduler(), FakeWorker()
    prompt = chat(3, 70)
    serve(sched, worker, "a", prompt)
    sched.add_request(request("b", prompt + [1, 2]))
    step = sched.schedule()
    assert len(step.restore_states) == 1
    assert sched.prefix_cache.clear() == 2 and sched.prefix_cache.num_entries == 0
    tokens = [t for out in sched.update(worker.run(step)) for t in out.token_ids]
    more, _ = run_to_end(sched, worker)
    assert tokens + more["b"] == reference(prompt + [1, 2])
    sched.self_check()
    assert sched.block_manager.num_free_blocks == sched.block_manager.num_total_blocks
    assert sched.state_pool.num_free_slots == sched.state_pool.num_total_slots


@pytest.mark.parametrize("budget", [24, 40, 256], ids=["budget-24", "budget-40", "budget-256"])
def test_chunked_prefill_ends_a_chunk_at_each_checkpoint(budget):
    sched, worker = make_scheduler(budget=budget), FakeWorker()
    prompt = chat(3, 70, (20, 20))                        # anchors at 70, 91, 112 -> splits 64, 80, 112
    ends, snapshots = [], []

    def record(step):
        row = step.rows[0]
        ends.append(row.context_len + row.num_tokens)
        snapshots.extend((row.context_len + row.num_tokens, c.src_slot == row.state_slot)
                         for c in step.snapshot_states)

    tokens, _ = serve(sched, worker, "a", prompt, on_step=record)
    assert tokens == reference(prompt)
    assert {64, 80, 112} <= set(ends)
    assert snapshots == [(64, True), (112, True)]         # first and last checkpoint only
    assert all(b - a <= budget for a, b in zip([0] + ends, ends))


def test_prompt_equal_to_a_cached_prefix_still_computes_its_last_token():
    sched, worker = make_scheduler(), FakeWorker()
    long_prompt = chat(4, 70, (20, 20))                   # entries at 64 and 112
    serve(sched, worker, "a", long_prompt)
    assert cached_lengths(sched) == [64, 112]
    exact = long_prompt[:112]
    steps = []
    tokens, req = serve(sched, worker, "b", exact, on_step=steps.append)
    assert req.num_cached_tokens == 64                    # the 112-token entry is not a proper prefix
    assert steps[0].rows[0].context_len == 64 and tokens == reference(exact)


def test_lru_eviction_order():
    sched, worker = make_scheduler(entries=2), FakeWorker()
    prompts = {name: filler(seed, 40) + [ANCHOR, 1, 2] for seed, name in enumerate("ABC", 10)}
    serve(sched, worker, "a", prompts["A"])
    serve(sched, worker, "b", prompts["B"])
    _, hit = serve(sched, worker, "a2", prompts["A"] + [3])  # A becomes the most recently used
    assert hit.num_cached_tokens == 32
    serve(sched, worker, "c", prompts["C"])
    remaining = [sched.prefix_cache.lookup(prompts[n] + [3]) is not None for n in "ABC"]
    assert remaining == [True, False, True]
    assert sched.prefix_cache.stats.num_evictions == 1
    sched.self_check()


def test_kv_pressure_evicts_entries_before_preempting():
    sched, worker = make_scheduler(num_blocks=24, budget=512), FakeWorker()
    for i in range(3):
        serve(sched, worker, f"warm{i}", chat(20 + i, 60))   # entries at 48 and 80: 5 blocks each
    cached = sched.prefix_cache.num_cached_blocks
    assert 0 < cached <= 12                                  # at most half the pool
    tokens, _ = serve(sched, worker, "big", filler(5, 300), max_tokens=40)
    assert tokens == reference(filler(5, 300), 40)
    assert sched.num_preemptions == 0 and sched.prefix_cache.num_cached_blocks < cached
    sched.self_check()


def test_failed_step_drops_the_entries_it_would_have_written():
    sched = make_scheduler()
    sched.add_request(request("a", chat(6, 70)))
    step = sched.schedule()
    assert len(step.snapshot_states) == 1 and sched.prefix_cache.num_entries == 1   # the chunk ends at 64
    sched.update(pb.StepResult(step_id=step.step_id, error="boom"))
    assert sched.prefix_cache.num_entries == 0
    sched.self_check()
    assert sched.block_manager.num_free_blocks == sched.block_manager.num_total_blocks


def test_many_random_requests_with_cancels_leak_nothing():
    rng = random.Random(1234)
    sched, worker = make_scheduler(num_blocks=32, num_slots=6, budget=96, entries=4), FakeWorker()
    systems = [filler(40 + s, rng.randint(40, 90)) for s in range(5)]
    expected, live = {}, {}
    for i in range(150):
        prompt = rng.choice(systems) + [ANCHOR] + filler(i, rng.randint(1, 40)) + [ANCHOR, 801]
        # Outputs up to 80 tokens: their growth preempts (prompts no longer take the blocks a running prefill needs).
        req = request(f"r{i}", prompt, rng.randint(1, 80))
        expected[req.req_id] = (prompt, req.max_tokens)
        sched.add_request(req)
        live[req.req_id] = []
        for _ in range(rng.randint(0, 3)):
            step = sched.schedule()
            if step is None:
                break
            for out in sched.update(worker.run(step)):
                live[out.req_id].extend(out.token_ids)
            if rng.random() < 0.15 and sched.requests:
                victim = rng.choice(sorted(sched.requests))
                sched.abort(victim)
                expected.pop(victim)
    tokens, _ = run_to_end(sched, worker)
    for req_id, got in tokens.items():
        live[req_id].extend(got)
    for req_id, (prompt, max_tokens) in expected.items():
        assert live[req_id] == reference(prompt, max_tokens), req_id
    stats = sched.prefix_cache.stats
    assert stats.num_hit_tokens > 0 and stats.num_evictions > 0 and sched.num_preemptions > 0
    sched.self_check()
    sched.prefix_cache.clear()
    assert sched.block_manager.num_free_blocks == sched.block_manager.num_total_blocks
    assert sched.state_pool.num_free_slots == sched.state_pool.num_total_slots


def test_a_preempted_request_looking_up_again_is_counted_apart():
    sched, worker = make_scheduler(num_blocks=24, budget=64), FakeWorker()
    serve(sched, worker, "warm", chat(30, 60))                        # entries at 48 and 80
    warm_queried = sched.prefix_cache.stats.num_query_tokens
    reqs = [request(f"r{i}", chat(30, 60, (20 + 9 * i,)), max_tokens=150) for i in range(4)]
    first_hits = {}

    def note_first_admission(step):
        for new in step.new_requests:
            req = next(r for r in reqs if r.req_id == new.req_id)
            first_hits.setdefault(req.req_id, req.num_cached_tokens)
    for req in reqs:
        sched.add_request(req)
    tokens, _ = run_to_end(sched, worker, on_step=note_first_admission)
    stats = sched.prefix_cache.stats
    assert sched.num_preemptions > 0
    assert stats.num_query_tokens - warm_queried == sum(r.num_prompt_tokens for r in reqs)
    assert stats.num_hit_tokens == sum(first_hits.values()) > 0
    assert stats.num_preempted_query_tokens > 0
    assert all(tokens[r.req_id] == reference(r.prompt_token_ids, 150) for r in reqs)
    sched.self_check()


def test_cached_tokens_are_those_of_the_first_admission_after_preemptions():
    # vLLM's Scheduler sets request.num_cached_tokens once ("if request.num_cached_tokens < 0"), at its first
    # admission: usage.prompt_tokens_details.cached_tokens and vllm:prompt_tokens_cached keep that count when a
    # preempted request is admitted again, as vllm:prefix_cache_hits does.
    sched, worker = make_scheduler(num_blocks=24, budget=64), FakeWorker()
    serve(sched, worker, "warm", chat(30, 60))
    reqs = [request(f"r{i}", chat(30, 60, (20 + 9 * i,)), max_tokens=150) for i in range(4)]
    first_hits, admitted = {}, {}

    def note_admissions(step):
        for req in reqs:
            if req.status == RUNNING:
                first_hits.setdefault(req.req_id, req.num_cached_tokens)
                admitted.setdefault(req.req_id, set()).add(req.num_cached_tokens)
    for req in reqs:
        sched.add_request(req)
    hits_before = sched.prefix_cache.stats.num_hit_tokens
    run_to_end(sched, worker, on_step=note_admissions)
    assert {r.req_id: r.num_cached_tokens for r in reqs} == first_hits
    assert sum(first_hits.values()) == sched.prefix_cache.stats.num_hit_tokens - hits_before


def test_a_request_that_cannot_read_the_cache_is_no_query():
    # vLLM's KVCacheManager.get_computed_blocks returns before PrefixCacheStats.record for a request with
    # skip_reading_prefix_cache (prompt logprobs): scoring requests neither query nor lower the hit rate.
    sched, worker = make_scheduler(), FakeWorker()
    prompt = chat(40, 60)
    serve(sched, worker, "warm", prompt)
    stats = sched.prefix_cache.stats
    queried, hit = stats.num_query_tokens, stats.num_hit_tokens
    scored = request("scored", prompt)
    scored.sampling.prompt_logprobs = 1
    sched.add_request(scored)
    run_to_end(sched, worker)
    assert scored.num_cached_tokens == 0
    assert (stats.num_query_tokens, stats.num_hit_tokens) == (queried, hit)
    served = serve(sched, worker, "again", prompt)[1]
    assert stats.num_query_tokens == queried + len(prompt)
    assert stats.num_hit_tokens == hit + served.num_cached_tokens > hit


def test_a_checkpoint_past_half_the_pool_evicts_no_entry():
    """A checkpoint whose prefix needs more KV blocks than the cache may ever hold (half the pool) is not cached, and
    the entries already there stay. It evicted them one by one before finding that it still did not fit (the ones it
    shares blocks with only make it need more), so a conversation longer than half the KV pool emptied the whole
    cache, its own system-prompt checkpoint included, on every turn (seen serving a 40-block pool of 8-token blocks:
    no hit at all, where 16-token blocks gave 400 cached tokens)."""
    sched, worker = make_scheduler(num_blocks=24, budget=512), FakeWorker()
    small = chat(30, 40)                                     # checkpoints at 32 and 48
    serve(sched, worker, "small", small)
    big = chat(31, 50, turn_lens=(180,))                     # at 48 (3 blocks) and 224 (14 > 12 blocks)
    tokens, _ = serve(sched, worker, "big", big)
    assert tokens == reference(big)
    assert sched.prefix_cache.stats.num_evictions == 0
    assert sorted(cached_lengths(sched)) == [32, 48, 48]
    _, hit = serve(sched, worker, "small2", small + [3])
    assert hit.num_cached_tokens == 48
    sched.self_check()
