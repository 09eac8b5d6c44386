"""Scheduler process: asynchronous scheduling, the next decode step planned while the worker runs this one.

In the decode steady state (nothing waits for a free seat, every running request samples in the step in flight) the
engine plans step n + 1 as soon as step n is sent, instead of after n's result: one decode row per request that
samples in n and can go on, whose input is the token the worker samples for it in n (pb.StepRow.previous_token). The
worker launches n + 1 right behind n, so the GPU does not idle while n's result travels to the scheduler, is applied, and the next
step is planned and sent back (1.5 ms of a 9.95 ms token at C = 1 on the H200, 27B shape: bench/step_hops.py,
2026-11-30). vLLM's async scheduling does the same (vllm/v1/core/sched/async_scheduler.py).

Why nothing is overwritten that is still needed: only Scheduler.schedule hands out state slots, admits requests,
preempts or evicts prefix-cache entries, and the engine calls it only with no step in flight; a lookahead step only
grows the block tables of its own rows from free blocks (None when a table cannot grow: the engine then waits for
the result and plans normally). A request that ends in step n (eos, stop string, abort) is released at once: its
lookahead row in n + 1 still runs and writes its KV at its own position in its old blocks, but the worker runs
steps in order, so a block handed to another request later is written there before it is read, and its sampled
token is dropped (Scheduler.update skips requests that are no longer running). Its sampling state goes with the
next step's finished_req_ids, after n + 1 ran.
"""
from proto import pb
from scheduler.request import RUNNING

PLACEHOLDER_TOKEN = -1


def plan(sched, prev_step) -> "pb.PackedStep | None":
    """The lookahead step behind `prev_step` (the only step in flight, every earlier result applied), or None when
    the steady state does not hold: a waiting request could be seated now (Scheduler.head_fits), a running request
    has no sampling row in prev_step (a prefill goes on), or a block table cannot grow without preempting. Rows of
    prev_step whose request has ended since (stop, abort) are left out; the others go on. Requests that wait while
    every seat is taken do not stop it: nothing could seat them before a running one ends, and a saturated server, the
    one with a queue, ran every step synchronously (the worker idle while each result came back and the next step
    was planned: 571 against 406 tok/s with it on and off at C = 8 on the H200, README); nor do requests that wait
    for KV blocks while a seat is free: each step ran synchronously while they waited (3 steps planned ahead of 199
    behind a 400-token prompt in a 40-block pool)."""
    if sched.head_fits():
        return None
    sampling = [row.req_id for row in prev_step.rows if row.sample]
    if not {r.req_id for r in sched.running} <= set(sampling):
        return None
    step = pb.PackedStep(session_id=sched.session_id)
    grown = []
    for req_id in sampling:
        req = sched.requests.get(req_id)
        if req is None or req.status != RUNNING or not _goes_on(req, sched.max_context_len):
            continue
        if not sched.block_manager.grow(req.block_ids, req.num_computed_tokens + 1):
            # Nothing planned: the tables keep their blocks, the next schedule uses them (and sends them: the rows
            # built here never reach the worker).
            for other, row in zip(grown, step.rows):
                other.num_computed_tokens -= 1
                other.num_blocks_sent = row.block_table_start
            return None
        _add_row(step.rows, req)
        req.num_computed_tokens += 1
        grown.append(req)
    if not grown:
        return None
    step.token_ids.extend([PLACEHOLDER_TOKEN] * len(grown))
    return sched.seal(step)


def _add_row(rows, req) -> None:
    """Req's decode row on the token it samples in the step in flight, built in place: a pb.StepRow made apart and
    appended is built and then copied, 5.3 us a row against 2.3 (256 rows: 1.36 ms of a step; bench/scheduler_host.py)."""
    row = rows.add()
    row.req_id = req.req_id
    row.num_tokens = 1
    row.context_len = req.num_computed_tokens
    row.state_slot = req.state_slot
    row.block_table_start, block_ids = req.take_block_table()
    row.block_table.extend(block_ids)
    row.sample = True
    row.previous_token = True


def _goes_on(req, max_context_len: int) -> bool:
    """Whether req can still run after the token it samples in the step in flight (its only unapplied one), unless
    that token stops it: not at max_tokens then, and below the context limit (Scheduler._append_token's tests)."""
    if req.max_tokens and len(req.output_token_ids) + 1 >= req.max_tokens:
        return False
    return req.num_computed_tokens + 1 < max_context_len
