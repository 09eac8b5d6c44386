"""Unit tests: the Scheduler's result side (StepOutputs) is a part it holds, not a base class (house rule: no mixins,
/work/shared/style.md): before, Scheduler(StepOutputs) inherited a class with no __init__ of its own that used the
scheduler's attributes, a mixin under another name."""
from proto import pb
from scheduler.scheduler import Scheduler
from scheduler.step_outputs import StepOutputs
from tests.unit.test_scheduler import make_request, make_scheduler


def test_scheduler_holds_its_step_outputs_instead_of_inheriting_them():
    sched = make_scheduler()
    assert Scheduler.__bases__ == (object,)
    assert isinstance(sched.outputs, StepOutputs) and sched.outputs.sched is sched


def test_update_reads_the_pools_reset_pools_put_in_place():
    """reset_pools replaces the prefix cache and max_context_len: the result side reads the new ones."""
    sched = make_scheduler()
    req = make_request("r", 4, max_tokens=0)
    sched.add_request(req)
    out = sched.schedule()
    assert out is not None
    sched.max_context_len = req.num_tokens + 1      # as reset_pools leaves it: one token more fits
    [output] = sched.update(pb.StepResult(req_ids=["r"], token_ids=[7], logprobs=[-0.5]))
    assert output.finish_reason == "length" and not sched.has_work()
    assert sched.fail_running("boom") == []
