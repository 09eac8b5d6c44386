"""Unit tests: min_tokens in the scheduler (stop ids sent to the worker, no stop before min_tokens, admission)."""
import pytest

from proto import pb
from scheduler.admission import InvalidRequestError, check_sampling
from scheduler.request import Request
from tests.unit.test_scheduler import make_scheduler

EOS, STOP = 999, 42


def min_request(req_id="m", min_tokens=3, max_tokens=10, eos=frozenset({EOS})):
    return Request(req_id, [1, 2, 3], pb.SamplingParams(min_tokens=min_tokens), max_tokens,
                   stop_token_ids=frozenset({STOP}), eos_token_ids=eos)


def step_result(step, token_id):
    result = pb.StepResult(step_id=step.step_id)
    for row in step.rows:
        if row.sample:
            result.req_ids.append(row.req_id)
            result.token_ids.append(token_id)
            result.logprobs.append(-1.0)
    return result


def feed(sched, tokens):
    """Schedules one step per token and answers it with that token; returns every RequestOutput."""
    outputs = []
    for token_id in tokens:
        step = sched.schedule()
        if step is None:
            break
        outputs.extend(sched.update(step_result(step, token_id)))
    return outputs


def test_new_request_carries_eos_and_stop_ids_only_with_min_tokens():
    sched = make_scheduler()
    sched.add_request(min_request("with"))
    sched.add_request(min_request("without", min_tokens=0))
    sched.add_request(min_request("ignore-eos", eos=frozenset()))
    news = {n.req_id: n for n in sched.schedule().new_requests}
    assert list(news["with"].min_tokens_stop_ids) == [STOP, EOS]
    assert news["with"].sampling.min_tokens == 3
    assert list(news["without"].min_tokens_stop_ids) == []
    assert list(news["ignore-eos"].min_tokens_stop_ids) == [STOP]


def test_stop_and_eos_tokens_do_not_finish_before_min_tokens():
    sched = make_scheduler()
    sched.add_request(min_request(min_tokens=3))
    outputs = feed(sched, [EOS, STOP, 5, EOS])
    # The first three tokens (two of them stop ids) are ordinary output; the fourth ends the request.
    assert [o.token_ids for o in outputs] == [[EOS], [STOP], [5], []]
    assert [o.finish_reason for o in outputs] == ["", "", "", "stop"] and outputs[-1].stop_token_id == EOS
    assert not sched.has_work()
    sched.self_check()


def test_min_tokens_counts_output_from_before_a_preemption():
    sched = make_scheduler()
    req = min_request(min_tokens=3)
    req.output_token_ids = [5, 6, 7]      # generated before a preemption, resumed by recompute
    sched.add_request(req)
    step = sched.schedule()
    assert list(step.new_requests[0].output_token_ids) == [5, 6, 7]
    outputs = sched.update(step_result(step, STOP))
    assert outputs[0].finish_reason == "stop" and outputs[0].stop_token_id == STOP


def test_without_min_tokens_the_first_eos_finishes():
    sched = make_scheduler()
    sched.add_request(min_request(min_tokens=0))
    outputs = feed(sched, [EOS])
    assert outputs[0].finish_reason == "stop" and outputs[0].token_ids == []


@pytest.mark.parametrize("min_tokens, max_tokens, ok", [(0, 5, True), (5, 5, True), (6, 5, False), (-1, 5, False),
                                                        (500, 0, True)])
def test_admission_checks_min_tokens(min_tokens, max_tokens, ok):
    request = pb.GenerateRequest(req_id="a", prompt_token_ids=[1], max_tokens=max_tokens,
                                 sampling=pb.SamplingParams(min_tokens=min_tokens))
    if ok:
        check_sampling(request, 1000)
    else:
        with pytest.raises(InvalidRequestError, match="min_tokens"):
            check_sampling(request, 1000)
