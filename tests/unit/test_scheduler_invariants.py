"""Unit tests: the scheduler under seeded random workloads (tests/unit/sched_drive.py), every invariant of
tests/unit/sched_checks.py checked after each planned step and each result, every answer against the one its request
implies (tests/unit/sched_oracle.py), and the cases those runs found, shrunk.

    python -m tests.unit.sched_drive 0 3000     # the long run: counts, and each failing seed with its message
"""
from proto import pb
from scheduler.prefix_cache import PrefixCacheConfig
from scheduler.request import Request
from scheduler.scheduler import Scheduler, SchedulerLimits
from tests.unit.sched_drive import Run, Setup, Tally
from tests.unit.test_prefix_cache import ANCHOR, FakeWorker, filler, reference


def test_short_seeded_runs_keep_every_invariant_and_reach_what_they_are_for():
    tally = Tally()
    for seed in range(40):
        Run(seed, tally=tally).run()
    assert tally.runs == 40 and tally.steps > 5000 and tally.requests > 1000
    # the workloads reach each path they are meant to: refusals, preemptions, prefix hits, cancels in each phase,
    # each finish reason
    assert tally.refused and tally.preemptions and tally.hit_tokens, tally
    assert min(tally.cuts.values()) > 0 and set(tally.reasons) == {"stop", "length", "error"}, tally


def _prompt(seed: int, length: int, anchors: tuple) -> list:
    prompt = filler(seed, length)
    for pos in anchors:
        prompt[pos] = ANCHOR
    return prompt


def test_a_snapshot_takes_no_state_slot_the_head_of_the_queue_is_seated_in():
    """Two state slots, so the prefix cache may hold one. A running prefill's chunk ends at its second checkpoint
    while a short request waits and fits the KV pool: the new snapshot evicted the first and took the slot it freed,
    pending (a pending entry never gives way), and the waiting request found no slot and sat the step out, the budget
    left unused (sched_drive seeds 14, 54, 63, 76, 77, 80 of 300: 'fits, not seated'). Entries give way to requests
    (scheduler/prefix_cache.py), so the snapshot is not taken: the slot goes to the request."""
    limits = SchedulerLimits(max_num_batched_tokens=64, max_num_seqs=8)
    cache = PrefixCacheConfig(enabled=True, max_entries=8, min_tokens=16, anchor_token_id=ANCHOR)
    sched, worker = Scheduler(limits, 64, 16, 2, 4096, prefix_cache=cache), FakeWorker()
    long_prompt = _prompt(1, 100, (20, 36))     # checkpoints (split and snapshot points) at 16 and 32
    sched.add_request(Request("long", long_prompt, pb.SamplingParams(), 4))
    step = sched.schedule()                     # 0..16, snapshot at 16 into the second slot
    assert [(r.context_len, r.num_tokens) for r in step.rows] == [(0, 16)] and len(step.snapshot_states) == 1
    sched.update(worker.run(step))
    short_prompt = filler(2, 10)
    sched.add_request(Request("short", short_prompt, pb.SamplingParams(), 4))
    step = sched.schedule()
    assert [(r.req_id, r.context_len, r.num_tokens) for r in step.rows] == [("long", 16, 16), ("short", 0, 10)]
    assert not step.snapshot_states and sched.prefix_cache.num_entries == 0
    tokens = {}
    while step is not None:
        for out in sched.update(worker.run(step)):
            tokens.setdefault(out.req_id, []).extend(out.token_ids)
        step = sched.schedule()
    assert tokens == {"long": reference(long_prompt, 4), "short": reference(short_prompt, 4)}
    sched.prefix_cache.clear()
    assert sched.state_pool.num_free_slots == 2 and sched.block_manager.num_free_blocks == 64


def test_a_snapshot_that_the_seats_leave_no_slot_for_evicts_no_entry():
    """Four state slots: a running request, two ready entries and one free slot, and the requests seated in this step
    keep three (keep_slots). Evicting both entries would free three slots, all of them the seats', so the snapshot
    cannot be taken whatever goes: it evicted both entries trying (the cache emptied for nothing); now it leaves them."""
    limits = SchedulerLimits(max_num_batched_tokens=64, max_num_seqs=8)
    cache = PrefixCacheConfig(enabled=True, max_entries=8, min_tokens=16, anchor_token_id=ANCHOR)
    sched = Scheduler(limits, 64, 16, 4, 4096, prefix_cache=cache)
    worker = FakeWorker()
    for seed in (3, 4):                         # two entries (16-token prefixes), ready
        sched.add_request(Request(f"e{seed}", _prompt(seed, 20, (17,)), pb.SamplingParams(), 1))
        while sched.has_work():
            sched.update(worker.run(sched.schedule()))
    assert sched.prefix_cache.num_entries == 2 and sched.state_pool.num_free_slots == 2
    req = Request("long", _prompt(1, 40, (20,)), pb.SamplingParams(), 1)
    sched.add_request(req)
    sched._plan(req)
    req.status, req.state_slot = "running", sched.state_pool.allocate()
    sched.waiting.remove(req)
    sched.running.append(req)
    sched.block_manager.grow(req.block_ids, 16)
    assert sched.prefix_cache.snapshot(req, 16, keep_slots=3) == -1
    assert sched.prefix_cache.num_entries == 2
    assert sched.prefix_cache.snapshot(req, 16, keep_slots=1) >= 0   # a slot past the seats': taken
