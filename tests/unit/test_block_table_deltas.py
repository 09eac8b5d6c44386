"""Block tables sent as deltas (StepRow.block_table_start; worker/block_tables.py keeps each slot's table): at every
step the table the worker rebuilds for each row must be the scheduler's own req.block_ids, and the [N, B] tensor the
same a whole table per row gave, through finishes, aborts, preemption and resume, prefix-cache hits (anchored and raw
prompts), chunked prefill and lookahead steps. The oracle is the scheduler's state when the step is planned, never
the packed rows."""
import random

import pytest
import torch

from proto import pb
from scheduler.prefix_cache import PrefixCacheConfig
from scheduler.request import Request
from scheduler.scheduler import Scheduler, SchedulerLimits
from tests.unit.test_prefix_cache import ANCHOR, chat, filler
from tests.unit.test_scheduler import BLOCK, FakeWorker
from tests.unit.test_scheduler_lookahead import run_with_lookahead
from tests.unit.test_worker_pipeline import _setup, tiny  # noqa: F401  (tiny: the fixture)
from worker.batch import ForwardBatch


class CheckedWorker(FakeWorker):
    """FakeWorker that, once a step is applied, checks every row's slot table against the scheduler's request."""

    def __init__(self, sched):
        super().__init__()
        self.sched = sched
        self.num_rows = self.num_deltas = self.num_ids_sent = self.num_ids_held = 0

    def run(self, step):
        result = super().run(step)
        wholes = []
        for row in step.rows:
            req = self.sched.requests[row.req_id]
            assert self.tables.table(row.state_slot) == req.block_ids, (step.step_id, row.req_id)
            wholes.append(([0] * row.num_tokens, row.context_len, row.state_slot, req.block_ids, row.sample))
            self.num_deltas += row.block_table_start > 0
            self.num_ids_sent += len(row.block_table)
            self.num_ids_held += len(req.block_ids)
        self.num_rows += len(step.rows)
        if wholes:
            block_tables, _ = self.tables.gather([row.state_slot for row in step.rows])
            assert torch.equal(torch.from_numpy(block_tables), ForwardBatch.from_rows(wholes, BLOCK).block_tables)
        return result


def prompts(rng: random.Random) -> list:
    """Chats sharing system prompts (anchored prefix-cache hits), raw prompts repeated (grid hits), short ones."""
    systems = [filler(s, 120 + 40 * s) for s in range(2)]
    out = []
    for i in range(40):
        kind = i % 3
        if kind == 0:
            out.append(systems[i % 2] + chat(100 + i, 0, (10 + i % 7,)))
        elif kind == 1:
            out.append(filler(7 + i % 2, 300 + (i % 4) * 10))
        else:
            out.append(filler(50 + i, rng.randrange(5, 60)))
    return out


def serve_mixed(num_blocks: int, ahead: bool, max_tokens=(3, 90), abort_every=11, seed: int = 0):
    """40 requests arriving over the first steps into a small pool and token budget (preemption, chunked prefill),
    the prefix cache on, stop tokens and aborts (some while a step is in flight) freeing slots for others."""
    rng = random.Random(seed)
    config = PrefixCacheConfig(True, 8, 32, ANCHOR)
    sched = Scheduler(SchedulerLimits(96, 8), num_blocks, BLOCK, 12, 4096, prefix_cache=config)
    worker = CheckedWorker(sched)
    pending = [Request(f"r{i}", p, pb.SamplingParams(), rng.randrange(*max_tokens), stop_token_ids=frozenset({7, 11}))
               for i, p in enumerate(prompts(rng))]
    aborted = []

    def before_step(n: int) -> None:
        if pending and (n % 3 == 0 or not sched.has_work()):
            sched.add_request(pending.pop(0))
        if n % abort_every == 3 and sched.running:
            aborted.append(sched.abort(rng.choice(sched.running).req_id).req_id)

    run_with_lookahead(sched, worker, before_step=before_step, ahead=ahead)
    assert not pending
    sched.self_check()
    return sched, worker, aborted


SCENARIOS = {   # num_blocks, max_tokens range, abort every n-th round; preemptions?, prefix-cache hits?
    "small-pool": (60, (100, 250), 37, True, False),
    "cache-and-preemption": (120, (100, 250), 37, True, True),
    "roomy-pool-aborts": (400, (3, 90), 11, False, True)}


@pytest.mark.parametrize("ahead", [True, False], ids=["lookahead", "synchronous"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_worker_table_of_every_row_is_the_scheduler_table(scenario, ahead):
    num_blocks, max_tokens, abort_every, preempts, hits = SCENARIOS[scenario]
    sched, worker, aborted = serve_mixed(num_blocks, ahead, max_tokens, abort_every)
    assert (sched.num_preemptions > 0) == preempts and (sched.prefix_cache.stats.num_hit_tokens > 0) == hits
    assert aborted
    # Most rows carry only what their request gained: a fraction of the ids whole tables would have carried.
    assert worker.num_deltas > worker.num_rows // 2
    assert worker.num_ids_sent < worker.num_ids_held // 10


def test_a_row_that_does_not_continue_its_slot_table_is_refused():
    from worker.block_tables import BlockTableError, SlotTables
    tables = SlotTables(4, num_blocks=2)
    tables.update(pb.StepRow(req_id="a", state_slot=1, block_table=[4, 5, 6]))
    tables.update(pb.StepRow(req_id="a", state_slot=1, block_table=[9], block_table_start=3))
    assert tables.table(1) == [4, 5, 6, 9]
    for row in (pb.StepRow(req_id="b", state_slot=1, block_table=[2], block_table_start=4),   # another request's
                pb.StepRow(req_id="a", state_slot=1, block_table=[2], block_table_start=3),   # a length it lacks
                pb.StepRow(req_id="a", state_slot=2, block_table=[2], block_table_start=4)):  # a slot it never held
        with pytest.raises(BlockTableError):
            tables.update(row)
    tables.update(pb.StepRow(req_id="b", state_slot=1, block_table=[3]))   # whole: replaces, -1 past it
    assert tables.table(1) == [3] and set(tables.ids[1, 1:].tolist()) == {-1}
    tables.clear()
    with pytest.raises(BlockTableError):
        tables.update(pb.StepRow(req_id="b", state_slot=1, block_table=[8], block_table_start=1))


def _step(step_id: int, session_id: str, start: int, block_ids: list, context_len: int, num_tokens: int, new=False):
    step = pb.PackedStep(step_id=step_id, session_id=session_id)
    if new:
        step.new_requests.add(req_id="x", sampling=pb.SamplingParams(), prompt_token_ids=list(range(5, 25)))
    step.rows.add(req_id="x", num_tokens=num_tokens, context_len=context_len, state_slot=1, block_table=block_ids,
                  block_table_start=start, sample=True)
    step.token_ids.extend(range(5, 5 + num_tokens))
    return step


def test_a_new_session_or_a_failed_step_drops_the_worker_tables(tiny):
    """A restarted scheduler (new session) or a step that failed part-way leaves no table a later row could continue
    by mistake: the row is refused (the scheduler sends whole tables to a new session; after a failed step it fails
    every running request, so only a lookahead row planned behind it is refused)."""
    _, runner = _setup(tiny)
    assert not runner.execute(_step(1, "s", 0, [3, 4], 0, 20, new=True)).error
    assert not runner.execute(_step(2, "s", 2, [], 20, 1)).error
    refused = runner.execute(_step(3, "t", 2, [7], 21, 12, new=True)).error
    assert "continues its block table from 2 blocks, but slot 1 holds 0" in refused
    assert not runner.execute(_step(4, "t", 0, [5], 0, 12)).error
    failed = _step(5, "t", 1, [6], 12, 6)
    failed.rows.add(req_id="y", num_tokens=1, context_len=0, state_slot=99, block_table=[0], sample=True)
    failed.token_ids.append(5)
    assert "state slot 99" in runner.execute(failed).error
    assert "holds 0" in runner.execute(_step(6, "t", 2, [], 18, 1)).error


@pytest.mark.parametrize("block_ids", [[3, -2], [64], [3, 10 ** 6]], ids=["negative", "pool-size", "far-past"])
def test_a_block_id_outside_the_pool_fails_the_step(tiny, block_ids):
    """Message validation: a row's block ids must lie in the KV pool (64 blocks here). A negative id indexed the cache
    from its end, so the step ran on another request's block without a word; one past the pool is an illegal address
    in the CUDA kernels (on the CPU an IndexError)."""
    _, runner = _setup(tiny)
    error = runner.execute(_step(1, "s", 0, block_ids, 0, 20, new=True)).error
    assert "outside the pool [0, 64)" in error and str(next(b for b in block_ids if not 0 <= b < 64)) in error
    assert not runner.execute(_step(2, "s", 0, [3, 4], 0, 20)).error
