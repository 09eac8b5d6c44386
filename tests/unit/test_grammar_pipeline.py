"""Unit tests: a Constraint passes through the scheduler untouched, and a bad grammar fails only its request."""
import os

import pytest

from proto import pb
from scheduler import preemption
from scheduler.request import Request
from scheduler.scheduler import Scheduler, SchedulerLimits

TINY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models", "tiny")
GOOD = pb.Constraint(kind="lark", grammar='start: "yes" | "no"')
BAD = pb.Constraint(kind="lark", grammar="start: missing_rule")


def make_scheduler(num_blocks=64):
    return Scheduler(SchedulerLimits(max_num_batched_tokens=256, max_num_seqs=8), num_blocks, 16, 8, 4096)


def request(req_id, constraint=None, num_prompt=20):
    return Request(req_id, list(range(1, num_prompt + 1)), pb.SamplingParams(), 8, constraint=constraint)


def sampled(step, token_id=5, failed=()):
    result = pb.StepResult(step_id=step.step_id)
    for row in step.rows:
        if row.req_id in failed:
            result.failed_requests.add(req_id=row.req_id, error=f"bad grammar of {row.req_id}")
        elif row.sample:
            result.req_ids.append(row.req_id)
            result.token_ids.append(token_id)
            result.logprobs.append(-1.0)
    return result


def test_constraint_travels_untouched_and_again_on_resume():
    sched = make_scheduler()
    sched.add_request(request("c", GOOD))
    sched.add_request(request("u"))
    step = sched.schedule()
    sent = {new.req_id: new for new in step.new_requests}
    assert sent["c"].constraint == GOOD and not sent["u"].HasField("constraint")
    sched.update(sampled(step))
    preemption.preempt(sched, sched.requests["c"])
    resumed = next(new for new in sched.schedule().new_requests if new.req_id == "c")
    assert resumed.constraint == GOOD and list(resumed.output_token_ids) == [5]


def test_failed_request_ends_alone_as_invalid():
    sched = make_scheduler()
    sched.add_request(request("bad", BAD))
    sched.add_request(request("ok"))
    step = sched.schedule()
    outputs = {out.req_id: out for out in sched.update(sampled(step, failed={"bad"}))}
    assert outputs["bad"].finish_reason == "error" and outputs["bad"].invalid
    assert outputs["bad"].error == "bad grammar of bad"
    assert outputs["ok"].token_ids == [5] and not outputs["ok"].error
    next_step = sched.schedule()
    assert [row.req_id for row in next_step.rows] == ["ok"] and list(next_step.finished_req_ids) == ["bad"]


@pytest.fixture(scope="module")
def runner():
    if not os.path.isfile(os.path.join(TINY, "config.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    from worker.server import WorkerConfig, build_runner
    return build_runner(WorkerConfig(model=TINY, device="cpu", num_kv_blocks=32, num_state_slots=4))[0]


def test_worker_fails_the_bad_grammar_row_and_runs_the_rest(runner):
    sched = make_scheduler(num_blocks=32)
    for req_id, constraint in (("bad", BAD), ("good", GOOD), ("free", None)):
        sched.add_request(request(req_id, constraint, num_prompt=6))
    step = sched.schedule()
    step.session_id = sched.session_id
    result = runner.execute(step)
    assert not result.error
    assert [(f.req_id, "unknown name" in f.error) for f in result.failed_requests] == [("bad", True)]
    assert list(result.req_ids) == ["good", "free"]
    good = runner.grammars.tokenizer.decode_str([result.token_ids[0]])
    assert good and ("yes".startswith(good) or "no".startswith(good))
