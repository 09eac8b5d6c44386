"""Unit tests: vLLM's request `priority` (its --scheduling-policy priority): admission order and preemption victims,
the scheduler driven by hand; the field reaching it through the gateway's fake scheduler."""
import orjson
import pytest

from tests.unit.test_scheduler import FakeWorker, make_request, make_scheduler, run_to_end


def prioritized(req_id, num_prompt, priority, **kw):
    req = make_request(req_id, num_prompt, **kw)
    req.priority = priority
    return req


def test_waiting_requests_are_admitted_lowest_priority_value_first():
    """One seat: requests queued with priorities 5, 0, -1, 0 ran in arrival order, the priorities ignored (accepted
    as a field of no effect). vLLM admits the lowest value first, ties in arrival order."""
    sched, worker = make_scheduler(max_num_seqs=1), FakeWorker()
    sched.add_request(prioritized("running", 5, 0, max_tokens=3))
    sched.update(worker.run(sched.schedule()))
    for req_id, priority in [("p5", 5), ("p0a", 0), ("urgent", -1), ("p0b", 0)]:
        sched.add_request(prioritized(req_id, 5, priority, max_tokens=2, seed=len(req_id)))
    admitted = []
    run_to_end(sched, worker, on_step=lambda step: admitted.extend(new.req_id for new in step.new_requests))
    assert admitted == ["urgent", "p0a", "p0b", "p5"]


def test_a_growing_request_preempts_the_least_urgent_running_one():
    """KV pressure: the newest running request was preempted whatever its priority, so an urgent late arrival lost
    its blocks to an older background one. vLLM preempts the highest priority value (the newest of those)."""
    sched, worker = make_scheduler(num_blocks=12, max_tokens_per_step=64, max_num_seqs=4), FakeWorker()
    sched.add_request(prioritized("background", 30, 10, max_tokens=70))
    sched.update(worker.run(sched.schedule()))
    sched.add_request(prioritized("urgent", 30, -5, max_tokens=70, seed=1))
    sched.update(worker.run(sched.schedule()))
    victims = []
    for _ in range(200):
        before = {r.req_id: r.num_preemptions for r in sched.requests.values()}
        step = sched.schedule()
        if step is None:
            break
        victims += [k for k, v in before.items() if sched.requests[k].num_preemptions > v]
        sched.update(worker.run(step))
    assert victims and set(victims) == {"background"}


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 4}),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 4})], ids=["chat", "completions", "responses"])
async def test_priority_reaches_the_scheduler(stack, path, body):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({"model": "default", **body, "priority": -3}))
    assert response.status == 200, await response.text()
    assert fake.script.requests[-1].priority == -3
    response = await client.post(path, data=orjson.dumps({"model": "default", **body, "priority": 10 ** 12}))
    assert response.status == 200 and fake.script.requests[-1].priority == 2 ** 31 - 1
