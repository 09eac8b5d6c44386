"""Test helper: invariants of a Scheduler (scheduler/scheduler.py) checked after every planned step and every result.

check_pools: every KV block's refcount is its holders (running requests' tables and prefix-cache entries), the free
list holds the rest once, waiting requests hold nothing, each state slot has one holder or is free, a block two
requests hold is a full one both computed past (read-only), tables cover the computed tokens.
check_step: the packed step keeps the token budget and max_num_seqs, each row continues its request where it stopped
(or starts at 0 / a ready entry's end, restored), writes only blocks no other holder reads, samples only at its
sequence's end, the copies name the right slots, and the requests seated are the head of the waiting queue (first
come first served: no later request overtakes one that waits)."""
from collections import Counter

from scheduler.request import RUNNING, WAITING


def snapshot(sched) -> dict:
    """What check_step compares a planned step against: the scheduler just before it planned."""
    return {
        "computed": {r.req_id: r.num_computed_tokens for r in sched.running},
        "waiting": [r.req_id for r in sched.waiting],
        "entries": {e.slot: (e.num_tokens, e.ready, frozenset(e.block_ids), e.key[:2])
                    for e in sched.prefix_cache.entries.values()},
        # the entries themselves (held, so no id is reused): a key may come back in a new entry within one step
        "objects": {id(e): e for e in sched.prefix_cache.entries.values()},
    }


def check_pools(sched) -> None:
    """The block and slot accounting of `sched` matches its requests and entries (AssertionError names the fault)."""
    bm, cache = sched.block_manager, sched.prefix_cache
    holders, cached = Counter(), Counter()
    for req in sched.running:
        assert req.status == RUNNING and req.state_slot >= 0, f"{req.req_id}: running without a slot"
        assert len(set(req.block_ids)) == len(req.block_ids), f"{req.req_id}: a block twice in its table"
        need = bm.num_blocks_needed(req.num_computed_tokens)
        assert need <= len(req.block_ids) <= need + 1, \
            f"{req.req_id}: {len(req.block_ids)} blocks for {req.num_computed_tokens} computed tokens"
        holders.update(req.block_ids)
    for req in sched.waiting:
        assert req.status == WAITING and not req.block_ids and req.state_slot < 0 and not req.num_computed_tokens, \
            f"{req.req_id}: waits holding blocks {req.block_ids}, slot {req.state_slot}, {req.num_computed_tokens}"
    for entry in cache.entries.values():
        holders.update(entry.block_ids)
        cached.update(entry.block_ids)
    assert dict(holders) == bm._refs, "block refcounts differ from their holders"
    assert dict(cached) == bm._cached, "cached refcounts differ from the entries"
    assert bm.num_cached_only == sum(holders[b] == cached[b] for b in cached), "num_cached_only is off"
    free = list(bm.free_block_ids)
    assert len(set(free)) == len(free) and not set(free) & set(holders), "a block free twice or free and held"
    assert len(free) + len(holders) == bm.num_total_blocks, "blocks lost"
    slots = [r.state_slot for r in sched.running] + [e.slot for e in cache.entries.values()]
    assert len(set(slots)) == len(slots), f"a state slot held twice: {slots}"
    pool = sched.state_pool
    assert not set(pool.free_slot_ids) & set(slots), "a slot free and held"
    assert len(pool.free_slot_ids) + len(slots) == pool.num_total_slots, "state slots lost"
    _check_shared(sched, holders, cached)
    assert len(sched.running) <= sched.max_num_seqs, f"{len(sched.running)} running, max_num_seqs"
    assert set(sched.requests) == {r.req_id for r in sched.running} | {r.req_id for r in sched.waiting}


def _check_shared(sched, holders: Counter, cached: Counter) -> None:
    """A block more than one request holds is full and computed by each of them (nobody writes it again)."""
    size = sched.block_manager.block_size
    for req in sched.running:
        for i, block in enumerate(req.block_ids):
            if holders[block] - cached[block] > 1:
                assert (i + 1) * size <= req.num_computed_tokens, \
                    f"{req.req_id}: shares block {block} that it still writes (index {i})"


def check_step(sched, step, before: dict, lookahead: bool = False) -> None:
    """`step` (just planned by sched.schedule, or lookahead.plan when `lookahead`) against `before` (snapshot)."""
    limits, bm = sched.limits, sched.block_manager
    num_tokens = sum(row.num_tokens for row in step.rows)
    assert num_tokens == len(step.token_ids), f"step {step.step_id}: rows of {num_tokens}, {len(step.token_ids)} ids"
    assert 0 < num_tokens <= limits.max_num_batched_tokens, f"step {step.step_id}: {num_tokens} tokens over budget"
    assert len(step.rows) <= sched.max_num_seqs, f"step {step.step_id}: {len(step.rows)} rows"
    # blocks of entries made before this step and still held (an entry evicted in it gave its blocks back)
    old_blocks = frozenset().union(*(e.block_ids for e in sched.prefix_cache.entries.values()
                                     if id(e) in before["objects"]))
    seated = []
    for row in step.rows:
        req = sched.requests.get(row.req_id)
        assert req is not None and req.status == RUNNING, f"{row.req_id}: a row but not running"
        assert row.state_slot == req.state_slot, f"{row.req_id}: row slot {row.state_slot}, own {req.state_slot}"
        end = row.context_len + row.num_tokens
        if row.req_id in before["computed"]:
            assert row.context_len == before["computed"][row.req_id], f"{row.req_id}: row does not continue"
        else:
            seated.append(row.req_id)
            _check_seated(step, row, before, (req.cache_salt, req.checkpoint_grid))
        assert row.sample == (end == req.num_tokens + lookahead), f"{row.req_id}: sample {row.sample} at {end}"
        assert len(req.block_ids) * bm.block_size >= end, f"{row.req_id}: table short of {end} tokens"
        first, last = row.context_len // bm.block_size, (end - 1) // bm.block_size
        for block in req.block_ids[first:last + 1]:
            assert bm.refcount(block) - bm.cached_refcount(block) == 1, f"{row.req_id}: writes shared block {block}"
            assert block not in old_blocks, f"{row.req_id}: writes block {block} of a prefix-cache entry"
    assert seated == before["waiting"][:len(seated)], f"seated {seated}, waiting head {before['waiting'][:5]}"
    _check_snapshots(sched, step, before)


def _check_seated(step, row, before: dict, kind: tuple) -> None:
    """A request seated in this step starts at 0, or at a ready entry's end with that entry's state restored, an
    entry of its own cache_salt and checkpoint kind (`kind`: anchors or grid)."""
    restores = [c for c in step.restore_states if c.dst_slot == row.state_slot]
    if row.context_len == 0:
        assert not restores, f"{row.req_id}: restored but starts at 0"
        return
    assert row.block_table_start == 0, f"{row.req_id}: seated without its whole table"
    assert len(restores) == 1, f"{row.req_id}: starts at {row.context_len} with no restore"
    entry = before["entries"].get(restores[0].src_slot)
    assert entry is not None and entry[1] and entry[0] == row.context_len and entry[3] == kind, \
        f"{row.req_id}: restored from slot {restores[0].src_slot} ({entry}) to start at {row.context_len}"


def _check_snapshots(sched, step, before: dict) -> None:
    entries = {e.slot: e for e in sched.prefix_cache.entries.values()}
    ends = {row.state_slot: row.context_len + row.num_tokens for row in step.rows}
    for copy in step.snapshot_states:
        entry = entries.get(copy.dst_slot)
        assert entry is not None and not entry.ready and id(entry) not in before["objects"], \
            f"snapshot into slot {copy.dst_slot}, no new entry's"
        assert ends.get(copy.src_slot) == entry.num_tokens, f"snapshot of a row that does not end at the prefix"
    assert not {c.src_slot for c in step.restore_states} - set(before["entries"]), "restore from no entry"
