"""Unit tests: the scheduler's step engine against an in-memory worker link (no sockets, no torch)."""
import asyncio

import pytest
from prometheus_client import CollectorRegistry

from proto import pb
from proto.wire_version import WIRE_VERSION
from scheduler.admission import ContextLengthError, QueueFullError, WorkerUnavailableError
from scheduler.config import SchedulerConfig
from scheduler.engine import Engine
from scheduler.metrics import Metrics
from tests.unit.test_scheduler import FakeWorker

CARD = {"max_context_len": 4096, "eos_token_ids": [999], "vocab_size": 1000}


class FakeLink:
    """Records what the engine sends; answers steps through FakeWorker when `auto` is on."""

    def __init__(self):
        self.sent = []
        self.inbox = asyncio.Queue()
        self.worker = FakeWorker()
        self.auto = True
        self.worker_id = "w1"
        self.serving_gone = False  # WorkerLink's: a send to the serving worker found its connection closed
        self.num_refusals = 0      # sends that fail as if no peer were connected yet

    def send(self, msg) -> bool:
        if self.num_refusals:
            self.num_refusals -= 1
            return False
        self.sent.append(msg)
        if self.auto and msg.WhichOneof("kind") == "ping":
            self.inbox.put_nowait(hello(self.worker_id, msg.ping.nonce))
        if self.auto and msg.WhichOneof("kind") == "step":
            result = self.worker.run(msg.step)
            result.session_id = msg.step.session_id
            self.inbox.put_nowait(pb.WorkerMessage(result=result))
        return True

    async def recv(self):
        return await self.inbox.get()


def hello(worker_id="w1", nonce=1, wire_version=WIRE_VERSION):
    return pb.WorkerMessage(hello=pb.WorkerHello(num_blocks=64, block_size=16, num_slots=4, max_context_len=4096,
                                                 worker_id=worker_id, vocab_size=1000, nonce=nonce,
                                                 wire_version=wire_version))


async def make_engine(**config):
    config = SchedulerConfig(ping_interval_s=0.02, worker_timeout_s=0.2, **config)
    link = FakeLink()
    engine = Engine(config, CARD, link, Metrics(CollectorRegistry()))
    engine.start()
    link.inbox.put_nowait(hello())
    await asyncio.wait_for(engine.alive_event.wait(), 1)
    return engine, link


def request(req_id, num_prompt=10, max_tokens=5, group_id=""):
    return pb.GenerateRequest(req_id=req_id, prompt_token_ids=list(range(3, 3 + num_prompt)), max_tokens=max_tokens,
                              ignore_eos=True, group_id=group_id)


async def drain(queue):
    tokens = []
    while True:
        item = await asyncio.wait_for(queue.get(), 2)
        if isinstance(item, Exception):
            raise item
        tokens.extend(item.token_ids)
        if item.finish_reason:
            return tokens, item


async def test_requests_complete_and_pools_drain():
    engine, _ = await make_engine()
    results = await asyncio.gather(*(drain(engine.submit(request(f"r{i}", 5 + i))) for i in range(6)))
    assert all(len(tokens) == 5 and last.finish_reason == "length" for tokens, last in results)
    assert results[0][1].num_generated_tokens == 5
    load = engine.load()
    assert load.num_free_slots == 4 and load.num_free_blocks == 64 and load.worker_alive
    await engine.stop()


async def test_worker_silence_fails_requests_unavailable():
    engine, link = await make_engine()
    link.auto = False
    queue = engine.submit(request("stuck"))
    with pytest.raises(WorkerUnavailableError, match="stopped answering"):
        await drain(queue)
    assert not engine.load().worker_alive
    with pytest.raises(WorkerUnavailableError):
        engine.submit(request("later"))
    link.auto, link.worker_id = True, "w2"
    link.inbox.put_nowait(hello("w2"))
    await asyncio.wait_for(engine.alive_event.wait(), 1)
    tokens, _ = await drain(engine.submit(request("after")))
    assert len(tokens) == 5
    await engine.stop()


async def test_stale_result_is_dropped():
    engine, link = await make_engine()
    link.auto = False
    queue = engine.submit(request("a", max_tokens=1))
    while not any(m.WhichOneof("kind") == "step" for m in link.sent):
        await asyncio.sleep(0)
    step = next(m.step for m in link.sent if m.WhichOneof("kind") == "step")
    stale = link.worker.run(step)
    stale.session_id = "old-session"
    link.inbox.put_nowait(pb.WorkerMessage(result=stale))
    good = link.worker.run(step)
    good.session_id = step.session_id
    link.inbox.put_nowait(pb.WorkerMessage(result=good))
    tokens, last = await drain(queue)
    assert tokens == list(good.token_ids) and last.finish_reason == "length"
    await engine.stop()


async def test_queue_depth_and_cancel():
    engine, link = await make_engine(max_queue_depth=1, max_num_seqs=1)
    link.auto = False
    engine.submit(request("seated"))
    engine.submit(request("a"))
    with pytest.raises(QueueFullError):
        engine.submit(request("b"))
    engine.cancel("a")
    assert engine.load().num_waiting + engine.load().num_running == 1
    engine.submit(request("c"))
    await engine.stop()


async def test_queue_depth_counts_an_api_request_once_by_its_group():
    """The choices of one API request (n > 1) share a group_id: once one is admitted the others are too, even past
    the depth; a call of another group (or of none) is still refused."""
    engine, link = await make_engine(max_queue_depth=1, max_num_seqs=1)
    link.auto = False
    engine.submit(request("seated"))
    choices = [request(f"cmpl-1-{i}", group_id="cmpl-1") for i in range(3)]
    for choice in choices:
        engine.submit(choice)
    assert engine.load().num_waiting + engine.load().num_running == 4
    other = request("cmpl-2-0", group_id="cmpl-2")
    for refused in (other, request("lone")):
        with pytest.raises(QueueFullError):
            engine.submit(refused)
    for choice in choices:
        engine.cancel(choice.req_id)
    engine.submit(other)
    await engine.stop()


async def test_rejected_metric_counts_a_refused_group_once():
    """Every choice of a refused n > 1 request is refused, but requests_rejected counts the API request once; a
    lone request (no group_id) still counts each time."""
    engine, link = await make_engine(max_queue_depth=1, max_num_seqs=1)
    link.auto = False
    engine.submit(request("seated"))
    engine.submit(request("a"))
    for refused in [request(f"cmpl-1-{i}", group_id="cmpl-1") for i in range(3)] + [request("b"), request("c")]:
        with pytest.raises(QueueFullError):
            engine.submit(refused)
    counter = engine.metrics.requests_rejected.labels(reason=QueueFullError.reason)
    assert counter._value.get() == 3
    await engine.stop()


async def test_unprompted_hello_does_not_register_and_refused_steps_are_resent():
    config = SchedulerConfig(ping_interval_s=0.02, worker_timeout_s=0.5)
    link = FakeLink()
    engine = Engine(config, CARD, link, Metrics(CollectorRegistry()))
    link.auto = False
    link.inbox.put_nowait(hello(nonce=0))
    engine.start()
    while not link.inbox.empty():
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)
    assert not engine.worker_alive
    link.auto = True
    await asyncio.wait_for(engine.alive_event.wait(), 1)  # registered by the answer to a ping
    link.num_refusals = 3
    tokens, _ = await drain(engine.submit(request("r")))
    assert len(tokens) == 5 and link.num_refusals == 0
    await engine.stop()


async def test_step_without_result_times_out_as_dead_worker():
    engine, link = await make_engine(step_timeout_s=0.1)
    link.auto = False
    link.worker_id = "w1"
    queue = engine.submit(request("lost"))
    # Pings keep being answered by hand, so only the step timeout can notice (a stuck worker's hellos that say a step
    # is pending do not register it again: tests/unit/test_scheduler_stuck_worker.py).
    while engine.worker_alive and queue.empty():
        link.inbox.put_nowait(hello("w1", 99))
        await asyncio.sleep(0.01)
    with pytest.raises(WorkerUnavailableError, match="no result for step"):
        await drain(queue)
    await engine.stop()


async def test_scheduler_bug_fails_running_requests_instead_of_hanging():
    engine, _ = await make_engine()

    def broken(result):
        raise RuntimeError("boom")

    engine.scheduler.update = broken
    queue = engine.submit(request("victim"))
    with pytest.raises(Exception, match="boom"):
        await drain(queue)
    await engine.stop()


@pytest.mark.parametrize("num_prompt, max_tokens, counts", [
    (10, 1015, (1024, 10, 1015)), (1024, 1, (1024, 1024, 0)), (1024, 0, (1024, 1024, 0))],
    ids=["prompt-plus-max-tokens", "prompt-alone", "prompt-alone-no-limit"])
async def test_a_request_past_the_context_is_refused_with_its_counts(num_prompt, max_tokens, counts):
    """The scheduler refuses what does not fit its context itself (it ran such a request to the context and ended it
    "length"), whatever the gateway checked. The 64 blocks of 16 tokens hold 1024; 10 + 1014 still fits."""
    engine, _ = await make_engine()
    with pytest.raises(ContextLengthError) as refused:
        engine.submit(request("long", num_prompt, max_tokens))
    assert refused.value.counts == counts
    tokens, last = await drain(engine.submit(request("fits", 10, 1014)))
    assert len(tokens) == 1014 and last.finish_reason == "length"
    await engine.stop()
