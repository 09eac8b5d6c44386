"""Unit tests: the scheduler driven by hand-made StepResults (no sockets, no torch)."""
import pytest

from proto import pb
from scheduler.admission import QueueFullError, check_queue_depth
from scheduler.request import Request
from scheduler.scheduler import Scheduler, SchedulerLeakError, SchedulerLimits
from worker.block_tables import SlotTables

VOCAB = 1000
BLOCK = 16


class FakeWorker:
    """Stands in for the model: per-slot rolling hash of every token fed; the sampled token depends on the
    whole sequence, so a wrong context_len, slot or chunk boundary changes the tokens. Block tables are kept per
    slot by the worker's own SlotTables (a row carries only the ids gained since its last row). The KV pool is kept
    too, token by token: a row writes its tokens at their positions through its table and, as attention does, reads
    every position before them back through it, which must give the sequence its slot's state was built from (a block
    shared, overwritten or handed out while another request still reads it fails here, not only a wrong state)."""

    def __init__(self, num_slots: int = 64, block_size: int = BLOCK):
        self.block_size = block_size
        self.state = {}      # slot -> (rolling hash, token ids fed so far)
        self.kv = {}         # (block id, offset in the block) -> token id written there
        self.tables = SlotTables(num_slots)
        self.seen_context = {}
        self.previous = {}  # req_id -> the token sampled for it in the last step run (StepRow.previous_token)

    def run(self, step) -> "pb.StepResult":
        result = pb.StepResult(step_id=step.step_id)
        self.copy(step.restore_states)
        offset, previous, self.previous = 0, self.previous, {}
        for row in step.rows:
            toks = step.token_ids[offset:offset + row.num_tokens]
            offset += row.num_tokens
            if row.previous_token:
                assert row.num_tokens == 1 and list(toks) == [-1], f"{row.req_id}: placeholder {list(toks)}"
                toks = [previous[row.req_id]]
            h, seq = (0, ()) if row.context_len == 0 else self.state[row.state_slot]
            assert len(seq) == row.context_len, f"{row.req_id}: slot holds {len(seq)}, row says {row.context_len}"
            self.tables.update(row)
            seq += tuple(toks)
            self.attend(row, seq)
            for t in toks:
                h = (h * 1_000_003 + t + 1) % (2 ** 61 - 1)
            self.state[row.state_slot] = (h, seq)
            if row.sample:
                self.previous[row.req_id] = h % VOCAB
                result.req_ids.append(row.req_id)
                result.token_ids.append(h % VOCAB)
                result.logprobs.append(-1.0)
        self.copy(step.snapshot_states)
        return result

    def attend(self, row, seq: tuple) -> None:
        """Writes the row's tokens (the tail of `seq`) into the KV pool through its slot's table, then reads all of
        `seq`'s positions back through it."""
        table, size = self.tables.table(row.state_slot), self.block_size
        assert len(table) * size >= len(seq), f"{row.req_id}: {len(table)} blocks for {len(seq)} tokens"
        for pos in range(row.context_len, len(seq)):
            self.kv[table[pos // size], pos % size] = seq[pos]
        read = tuple(self.kv.get((table[pos // size], pos % size)) for pos in range(len(seq)))
        if read != seq:
            pos = next(p for p in range(len(seq)) if read[p] != seq[p])
            raise AssertionError(f"{row.req_id}: KV block {table[pos // size]} holds {read[pos]} at position {pos}, "
                                 f"its sequence has {seq[pos]}")

    def copy(self, copies) -> None:
        """Prefix-cache state copies: every source read before any destination is written (as the worker does)."""
        states = [self.state[c.src_slot] for c in copies]
        for c, state in zip(copies, states):
            self.state[c.dst_slot] = state


def make_scheduler(num_blocks=256, num_slots=16, max_tokens_per_step=256, max_num_seqs=16, max_context_len=4096):
    limits = SchedulerLimits(max_num_batched_tokens=max_tokens_per_step, max_num_seqs=max_num_seqs)
    return Scheduler(limits, num_blocks, BLOCK, num_slots, max_context_len)


def make_request(req_id, num_prompt, max_tokens=8, seed=0, **kw):
    prompt = [(seed * 7919 + i * 31) % VOCAB for i in range(num_prompt)]
    return Request(req_id, prompt, pb.SamplingParams(), max_tokens, **kw)


def run_to_end(sched, worker, max_steps=10_000, on_step=None):
    """Steps until idle; returns {req_id: generated ids} (stop tokens excluded) and finish reasons."""
    tokens, reasons = {}, {}
    for _ in range(max_steps):
        step = sched.schedule()
        if step is None:
            break
        if on_step:
            on_step(step)
        for out in sched.update(worker.run(step)):
            tokens.setdefault(out.req_id, []).extend(out.token_ids)
            if out.finish_reason:
                reasons[out.req_id] = out.finish_reason
    assert not sched.has_work()
    return tokens, reasons


def test_token_budget_and_max_num_seqs_respected():
    sched = make_scheduler(max_tokens_per_step=64, max_num_seqs=5)
    for i in range(12):
        sched.add_request(make_request(f"r{i}", 20 + 13 * i, max_tokens=6, seed=i))
    sizes = []

    def check(step):
        sizes.append(sum(r.num_tokens for r in step.rows))
        assert sum(r.num_tokens for r in step.rows) == len(step.token_ids)
        assert len(step.rows) <= 5
        assert sched.num_running <= 5

    tokens, reasons = run_to_end(sched, FakeWorker(), on_step=check)
    assert max(sizes) <= 64
    assert max(sizes) == 64  # the budget is actually used, not just respected
    assert len(tokens) == 12 and all(len(t) == 6 for t in tokens.values())
    assert set(reasons.values()) == {"length"}


def test_decode_rows_never_starved_by_long_prefill():
    sched = make_scheduler(max_tokens_per_step=64)
    worker = FakeWorker()
    for i in range(4):
        sched.add_request(make_request(f"d{i}", 8, max_tokens=40, seed=i))
    sched.update(worker.run(sched.schedule()))
    sched.add_request(make_request("long", 600, max_tokens=2, seed=9))
    long_rows = 0
    for _ in range(12):
        step = sched.schedule()
        names = [r.req_id for r in step.rows]
        assert names[:4] == ["d0", "d1", "d2", "d3"], names
        assert all(r.num_tokens == 1 for r in step.rows[:4])
        long_rows += "long" in names
        sched.update(worker.run(step))
    assert long_rows >= 10


def test_chunked_prefill_resumes_where_it_stopped():
    sched = make_scheduler(max_tokens_per_step=100)
    req = make_request("p", 350, max_tokens=1)
    sched.add_request(req)
    worker = FakeWorker()
    seen = []
    while (step := sched.schedule()) is not None:
        row = step.rows[0]
        seen.append((row.context_len, row.num_tokens, row.sample))
        assert list(step.token_ids) == req.prompt_token_ids[row.context_len:row.context_len + row.num_tokens]
        assert len(step.new_requests) == (1 if row.context_len == 0 else 0)
        sched.update(worker.run(step))
        assert len(worker.tables.table(row.state_slot)) == -(-(row.context_len + row.num_tokens) // BLOCK)
    assert seen == [(0, 100, False), (100, 100, False), (200, 100, False), (300, 50, True)]


@pytest.mark.parametrize("where", ["waiting", "running-prefill", "running-decode"])
def test_cancellation_frees_everything(where):
    sched = make_scheduler(num_slots=2, max_tokens_per_step=32)
    worker = FakeWorker()
    sched.add_request(make_request("a", 40, max_tokens=50))
    sched.add_request(make_request("b", 10, max_tokens=50, seed=1))
    sched.add_request(make_request("c", 10, max_tokens=50, seed=2))
    steps = {"waiting": 1, "running-prefill": 1, "running-decode": 4}[where]
    for _ in range(steps):
        sched.update(worker.run(sched.schedule()))
    victim = {"waiting": "c", "running-prefill": "a", "running-decode": "b"}[where]
    assert sched.requests[victim].status == where.split("-")[0]
    held = len(sched.requests[victim].block_ids)
    free_before = sched.block_manager.num_free_blocks
    assert sched.abort(victim).finish_reason == "abort"
    assert sched.block_manager.num_free_blocks == free_before + held
    step = sched.schedule()
    assert victim not in [r.req_id for r in step.rows]
    assert (victim in step.finished_req_ids) == (where != "waiting")
    for other in list(sched.requests):
        sched.abort(other)
    sched.self_check()
    assert sched.block_manager.num_free_blocks == sched.block_manager.num_total_blocks
    assert sched.state_pool.num_free_slots == 2


def test_result_for_aborted_row_is_dropped():
    sched = make_scheduler()
    sched.add_request(make_request("a", 5))
    step = sched.schedule()
    sched.abort("a")
    assert sched.update(FakeWorker().run(step)) == []
    sched.self_check()


def test_preemption_and_resume_give_same_tokens():
    def run(num_blocks):
        sched = make_scheduler(num_blocks=num_blocks, num_slots=8, max_tokens_per_step=64, max_num_seqs=8)
        for i in range(6):
            sched.add_request(make_request(f"r{i}", 30 + 5 * i, max_tokens=40, seed=i))
        tokens, _ = run_to_end(sched, FakeWorker())
        sched.self_check()
        return tokens, sched.num_preemptions

    reference, num_ref = run(num_blocks=512)
    squeezed, num_preemptions = run(num_blocks=14)
    assert num_ref == 0
    assert num_preemptions > 0
    assert squeezed == reference


def test_preempted_request_resends_new_request_with_outputs():
    sched = make_scheduler(num_blocks=5, num_slots=4, max_tokens_per_step=64)
    worker = FakeWorker()
    sched.add_request(make_request("old", 30, max_tokens=30))
    sched.update(worker.run(sched.schedule()))
    sched.add_request(make_request("new", 30, max_tokens=30, seed=3))
    resent = None
    for _ in range(60):
        step = sched.schedule()
        if step is None:
            break
        for new in step.new_requests:
            if new.req_id == "new" and len(new.output_token_ids):
                resent = new
                assert "new" in step.finished_req_ids or sched.num_preemptions > 0
        sched.update(worker.run(step))
    assert sched.num_preemptions > 0
    assert resent is not None


def test_stop_conditions():
    sched = make_scheduler(max_context_len=64)
    worker = FakeWorker()
    probe = make_request("probe", 5, max_tokens=3)
    sched.add_request(probe)
    first = run_to_end(sched, worker)[0]["probe"]
    sched.add_request(make_request("eos", 5, max_tokens=3, eos_token_ids=frozenset([first[1]])))
    sched.add_request(make_request("stop", 5, max_tokens=3, seed=0, stop_token_ids=frozenset([first[0]])))
    sched.add_request(make_request("ctx", 50, max_tokens=0, seed=4))
    stops = {}
    for _ in range(100):
        step = sched.schedule()
        if step is None:
            break
        for out in sched.update(worker.run(step)):
            stops[out.req_id] = (out.finish_reason, out.stop_token_id) if out.finish_reason else None
    assert stops["eos"] == ("stop", first[1])
    assert stops["stop"] == ("stop", first[0])
    assert stops["ctx"] == ("length", -1)
    sched.self_check()


def test_step_error_aborts_running_requests():
    sched = make_scheduler()
    sched.add_request(make_request("a", 5))
    sched.schedule()
    outs = sched.update(pb.StepResult(error="boom"))
    assert [(o.req_id, o.finish_reason, o.error) for o in outs] == [("a", "error", "boom")]
    sched.self_check()


def test_idle_self_check_detects_leak():
    sched = make_scheduler()
    sched.add_request(make_request("a", 20, max_tokens=2))
    run_to_end(sched, FakeWorker())
    sched.self_check()
    sched.block_manager.grow([], 40)
    with pytest.raises(SchedulerLeakError):
        sched.self_check()


def test_queue_depth_rejection():
    check_queue_depth(num_waiting=100, max_queue_depth=0)
    check_queue_depth(num_waiting=1, max_queue_depth=2)
    with pytest.raises(QueueFullError) as err:
        check_queue_depth(num_waiting=2, max_queue_depth=2)
    assert err.value.code == "RESOURCE_EXHAUSTED"
