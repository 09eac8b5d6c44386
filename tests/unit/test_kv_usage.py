"""Unit tests: sparkinfer_kv_cache_usage_perc counts the KV blocks requests hold, as vLLM's kv_cache_usage_perc does.

A block that only prefix-cache entries hold is reusable at once (entries give way before a request waits), so it counts
as free: an idle server reads 0, not the size of its prefix cache (up to half the pool, which read as a half-full server
at rest; seen live: 0.037 idle after one 4818-token chat with the cache on). vLLM: the KV utilization "includes only KVs
with active requests running" (vllm-project/vllm#5176).
"""
import random

from scheduler.block_manager import BlockManager
from tests.unit.test_prefix_cache import FakeWorker, chat, make_scheduler, request, serve


def _cached_only(manager: BlockManager, holders: dict) -> int:
    """Blocks whose every holder is an entry, counted from the test's own record of who holds what."""
    return sum(1 for counts in holders.values() if counts["request"] == 0 and counts["entry"] > 0)


def test_random_sharing_keeps_the_count_of_entry_only_blocks():
    rng = random.Random(7)
    manager = BlockManager(64, 16)
    lists = []          # (is an entry, block ids) of every holder
    holders = {}        # block id -> {"request": n, "entry": n}
    for _ in range(3000):
        op = rng.random()
        if op < 0.3 or not lists:
            ids = []
            if manager.grow(ids, 16 * rng.randint(1, 4)):
                lists.append((False, ids))
                for b in ids:
                    holders[b] = {"request": 1, "entry": 0}
        elif op < 0.65:
            _, source = rng.choice(lists)
            as_entry = rng.random() < 0.5
            ids = manager.share(source[:rng.randint(1, len(source))], cached=as_entry)
            lists.append((as_entry, ids))
            for b in ids:
                holders[b]["entry" if as_entry else "request"] += 1
        else:
            as_entry, ids = lists.pop(rng.randrange(len(lists)))
            for b in ids:
                holders[b]["entry" if as_entry else "request"] -= 1
                if holders[b] == {"request": 0, "entry": 0}:
                    del holders[b]
            manager.free(ids, cached=as_entry)
        assert manager.num_cached_only == _cached_only(manager, holders)
        assert manager.num_cached_blocks == sum(1 for counts in holders.values() if counts["entry"])
        in_use_by_requests = sum(1 for counts in holders.values() if counts["request"])
        assert manager.usage == in_use_by_requests / 64


def test_an_idle_scheduler_with_cached_prefixes_reads_zero_usage():
    sched, worker = make_scheduler(), FakeWorker()
    prompt = chat(1, 70)
    serve(sched, worker, "a", prompt)
    manager = sched.block_manager
    assert sched.prefix_cache.num_cached_blocks == 5 and manager.num_free_blocks == manager.num_total_blocks - 5
    assert manager.usage == 0.0
    # A request that hits the cache holds the shared blocks: they count again while it runs, once each.
    hit = request("b", prompt + [5, 6, 7], max_tokens=40)
    sched.add_request(hit)
    sched.update(worker.run(sched.schedule()))
    assert hit.num_cached_tokens == 80 and hit.status == "running"
    assert manager.usage * manager.num_total_blocks == len(set(hit.block_ids))
    sched.abort("b")
    assert manager.usage == 0.0 and sched.prefix_cache.leak() == ""
