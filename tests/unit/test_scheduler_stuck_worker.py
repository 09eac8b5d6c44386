"""Unit tests: a worker whose compute loop is stuck (a step past SPARKINFER_STEP_TIMEOUT_S) while its I/O thread still
answers pings, saying a step is pending, stays counted dead until it proves its compute loop runs again (a step result)
or a new worker process says hello, so that the launcher's hung-worker watchdog (deploy/watchdog.py), which waits for
SPARKINFER_WORKER_HUNG_S of "no live worker" in a row, can kill and restart it.

Before, the next ping's hello (0.2 s later) registered the stuck worker again as if new: health turned SERVING, new
requests were admitted, sent to the stuck loop and failed 503 after another 60 s each, for ever, and the watchdog never
saw the worker down long enough (vllm-project/vllm#36960, the hung engine the watchdog is for)."""
import asyncio

from proto import pb
from proto.wire_version import WIRE_VERSION
from scheduler.admission import WorkerUnavailableError
from tests.unit.test_scheduler_engine import drain, hello, make_engine, request
from worker.wire import SchedulerLink


def _hello(worker_id: str, nonce: int, num_steps_pending: int):
    msg = hello(worker_id, nonce)
    msg.hello.num_steps_pending = num_steps_pending
    return msg


async def _answer_pings(engine, link, worker_id: str, seconds: float, num_steps_pending: int = 1) -> None:
    """The worker's I/O thread: a hello for each ping, for `seconds`, with the steps it holds unanswered."""
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        link.inbox.put_nowait(_hello(worker_id, 1000 + len(link.sent), num_steps_pending))
        await asyncio.sleep(0.01)


async def _stuck_engine(num_steps_pending: int = 1):
    engine, link = await make_engine(step_timeout_s=0.1)
    link.auto = False       # steps get no result; the pings are answered by _answer_pings
    queue = engine.submit(request("stuck"))
    answering = asyncio.create_task(_answer_pings(engine, link, "w1", 0.5, num_steps_pending))
    try:
        await drain(queue)
    except WorkerUnavailableError as exc:
        assert "no result for step" in str(exc)
    else:
        raise AssertionError("the request did not fail")
    return engine, link, answering


async def test_a_stuck_worker_answering_pings_stays_dead():
    engine, link, answering = await _stuck_engine()
    await answering     # 0.4 s more of hellos from the stuck worker after its step timed out
    load = engine.load()
    assert not engine.worker_alive and not load.worker_alive
    assert load.num_total_slots == 4     # the pools are not reset for it either
    await engine.stop()


async def test_a_result_from_the_stuck_loop_lets_it_register_again():
    engine, link, answering = await _stuck_engine()
    await answering
    session = engine.scheduler.session_id
    # The compute loop came back: its late result (the old session's) proves it runs; the next hello registers it.
    link.inbox.put_nowait(pb.WorkerMessage(result=pb.StepResult(step_id=1, session_id=session)))
    link.auto = True
    link.inbox.put_nowait(hello("w1", 5000))
    await asyncio.wait_for(engine.alive_event.wait(), 1)
    assert engine.worker_alive and engine.scheduler.session_id != session
    tokens, last = await drain(engine.submit(request("after")))
    assert len(tokens) == 5 and last.finish_reason == "length"
    await engine.stop()


async def test_a_restarted_worker_registers_at_once():
    engine, link, answering = await _stuck_engine()
    await answering
    # The watchdog killed it; the launcher's new worker process has a new id.
    link.auto, link.worker_id = True, "w2"
    link.inbox.put_nowait(hello("w2", 6000))
    await asyncio.wait_for(engine.alive_event.wait(), 1)
    assert engine.worker_id == "w2"
    tokens, last = await drain(engine.submit(request("after")))
    assert len(tokens) == 5 and last.finish_reason == "length"
    await engine.stop()


async def test_a_worker_whose_step_was_lost_registers_again():
    """Its hellos say no step is pending: the step never reached it (dropped on a reconnect), so it is idle, not stuck,
    and is registered again as before."""
    engine, link, answering = await _stuck_engine(num_steps_pending=0)
    await answering
    link.auto = True
    link.inbox.put_nowait(_hello("w1", 7000, 0))
    await asyncio.wait_for(engine.alive_event.wait(), 1)
    tokens, last = await drain(engine.submit(request("after")))
    assert len(tokens) == 5 and last.finish_reason == "length"
    await engine.stop()


def test_the_workers_hello_counts_the_steps_it_has_not_answered():
    link = SchedulerLink("tcp://127.0.0.1:1", pb.WorkerHello(worker_id="w", wire_version=WIRE_VERSION))
    sent = []
    link._send = sent.append
    try:
        link.handle_step(pb.PackedStep(step_id=1))
        link.handle_ping(pb.Ping(nonce=1, wire_version=WIRE_VERSION))
        assert sent[-1].hello.num_steps_pending == 1
    finally:
        link.context.term()
