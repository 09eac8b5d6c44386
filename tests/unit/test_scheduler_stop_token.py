"""Unit tests: the eos / stop token that ends a request goes back with its logprob (and top tokens when asked),
though it is not a token of the text (scheduler and its GenerateResponse, no sockets)."""
import pytest
from prometheus_client import CollectorRegistry

from proto import pb
from scheduler.engine_stats import RequestTimer
from scheduler.metrics import Metrics
from scheduler.request import Request
from tests.unit.test_scheduler import make_scheduler

EOS = 999


def answer(step, token_id: int, logprob: float, top_ids: list) -> "pb.StepResult":
    """The worker's result for `step`: every sampling row drew `token_id`, with `top_ids` as its top tokens."""
    result = pb.StepResult(step_id=step.step_id)
    for row in step.rows:
        if row.sample:
            result.req_ids.append(row.req_id)
            result.token_ids.append(token_id)
            result.logprobs.append(logprob)
            result.top_logprobs.add(token_ids=top_ids, logprobs=[-0.1 * (j + 1) for j in range(len(top_ids))])
    return result


@pytest.mark.parametrize("num_logprobs", [0, 2], ids=["no-top", "top-2"])
def test_the_stop_token_comes_back_with_its_logprob(num_logprobs):
    sched = make_scheduler()
    req = Request("s", [1, 2, 3], pb.SamplingParams(num_logprobs=num_logprobs), 10, eos_token_ids=frozenset({EOS}))
    sched.add_request(req)
    first = sched.update(answer(sched.schedule(), 5, -0.5, [5, 6]))[0]
    last = sched.update(answer(sched.schedule(), EOS, -0.75, [EOS, 7]))[0]
    assert first.token_ids == [5] and len(first.top_logprobs) == (1 if num_logprobs else 0)
    assert last.token_ids == [] and last.logprobs == [] and last.top_logprobs == []
    assert (last.finish_reason, last.stop_token_id, last.stop_token_logprob) == ("stop", EOS, -0.75)
    response = RequestTimer(Metrics(CollectorRegistry())).response(req, last)
    assert (response.stop_token_id, response.stop_token_logprob, response.num_generated_tokens) == (EOS, -0.75, 2)
    assert list(response.token_ids) == [] and response.HasField("stop_token_top_logprobs") == bool(num_logprobs)
    if num_logprobs:
        assert list(response.stop_token_top_logprobs.token_ids) == [EOS, 7]


def test_a_request_that_ends_otherwise_has_no_stop_token_logprob():
    sched = make_scheduler()
    req = Request("l", [1, 2, 3], pb.SamplingParams(num_logprobs=1), 1, eos_token_ids=frozenset({EOS}))
    sched.add_request(req)
    last = sched.update(answer(sched.schedule(), 5, -0.5, [5]))[0]
    response = RequestTimer(Metrics(CollectorRegistry())).response(req, last)
    assert (response.finish_reason, response.stop_token_id, response.stop_token_logprob) == ("length", -1, 0.0)
    assert not response.HasField("stop_token_top_logprobs") and list(response.logprobs) == [-0.5]
