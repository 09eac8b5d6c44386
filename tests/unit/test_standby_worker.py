"""Unit tests: two workers connected to one scheduler, on the real sockets (scheduler/wire.py WorkerLink, the real
worker I/O thread worker/wire.py SchedulerLink; a FakeWorker as each one's compute loop). The first registered serves,
the second is a standby that gets no step, is logged once by both sides and takes over when the first one dies.

Before, the scheduler's PUSH dealt steps and pings round-robin over both workers: each saw half the steps, and each
one's hellos "replaced" the other ("worker a was replaced by worker b"), so every request failed (a compose file with
`replicas: 2`, a Kubernetes rolling update starting the new worker pod before the old one stops)."""
import asyncio
import logging
import threading

import zmq

from prometheus_client import CollectorRegistry

from proto import pb
from proto.wire_version import WIRE_VERSION
from scheduler.config import SchedulerConfig
from scheduler.engine import Engine
from scheduler.metrics import Metrics
from scheduler.wire import WorkerLink
from tests.e2e.stack import free_port
from tests.unit.test_scheduler import FakeWorker
from tests.unit.test_scheduler_engine import CARD, drain, hello, make_engine, request
from worker.wire import SchedulerLink


class FakeWorkerProcess:
    """A worker process: the real socket thread (SchedulerLink) and a compute thread answering steps by FakeWorker.
    num_steps counts the steps it ran."""

    def __init__(self, worker_addr: str, worker_id: str, num_blocks: int):
        hello = pb.WorkerHello(num_blocks=num_blocks, block_size=16, num_slots=4, max_context_len=4096,
                               worker_id=worker_id, vocab_size=1000, wire_version=WIRE_VERSION, device="cpu")
        self.link = SchedulerLink(worker_addr, hello)
        self.model = FakeWorker()
        self.num_steps = 0
        self.thread = threading.Thread(target=self.compute, daemon=True)
        self.thread.start()

    def compute(self) -> None:
        self.link.start()
        while (step := self.link.steps.get()) is not None:
            self.num_steps += 1
            result = self.model.run(step)
            result.session_id = step.session_id
            self.link.send_result(result)

    def kill(self) -> None:
        """Stops both threads and closes the sockets (the peer sees the connections close, as on SIGKILL)."""
        self.link.handle_shutdown(None)
        self.thread.join(5)
        self.link.close()


async def _wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def _serve_all(engine, tag: str, count: int = 6) -> None:
    results = await asyncio.gather(*(drain(engine.submit(request(f"{tag}{i}", 5 + i))) for i in range(count)))
    assert all(len(tokens) == 5 and last.finish_reason == "length" for tokens, last in results)


async def test_a_second_worker_is_a_standby_and_takes_over_when_the_first_dies(caplog, capfd):
    addr = f"tcp://127.0.0.1:{free_port(pair=True)}"
    link = WorkerLink(addr, "127.0.0.1")
    engine = Engine(SchedulerConfig(ping_interval_s=0.05, worker_timeout_s=0.5), CARD, link,
                    Metrics(CollectorRegistry()))
    engine.start()
    first = second = None
    try:
        with caplog.at_level(logging.INFO, logger="sparkinfer.scheduler"):
            first = FakeWorkerProcess(addr, "a", 64)
            await asyncio.wait_for(engine.alive_event.wait(), 5)
            second = FakeWorkerProcess(addr, "b", 48)
            await _wait_for(lambda: any("worker b is a standby" in r.getMessage() for r in caplog.records))
            await _serve_all(engine, "r")
            await asyncio.sleep(0.3)        # six more pings answered by both
            assert engine.worker_id == "a" and engine.load().num_total_blocks == 64
            assert first.num_steps > 0 and second.num_steps == 0
            first.kill()
            await _wait_for(lambda: engine.worker_id == "b")
            await _serve_all(engine, "s")
            assert engine.load().num_total_blocks == 48 and second.num_steps > 0
        messages = [r.getMessage() for r in caplog.records]
        assert [m for m in messages if "standby" in m] == ["worker b is a standby: worker a serves this scheduler"]
        assert not any("replaced" in m for m in messages)
        assert any("worker a disconnected" in m for m in messages)
        out = capfd.readouterr().out
        assert out.count("is a standby") == 1 and "worker b: is a standby: worker a serves the scheduler" in out
        assert "worker b: serves the scheduler now" in out
    finally:
        await engine.stop()
        for worker in (first, second):
            if worker is not None and worker.thread.is_alive():
                worker.kill()
        link.close()


async def _bind_again(addr: str) -> WorkerLink:
    """A WorkerLink on the ports of one just closed (ZeroMQ releases them in its I/O thread, a moment later)."""
    for _ in range(100):
        try:
            return WorkerLink(addr, "127.0.0.1")
        except zmq.ZMQError:
            await asyncio.sleep(0.02)
    raise AssertionError(f"{addr} stayed bound")


async def test_a_worker_announces_itself_again_to_a_restarted_scheduler():
    """The scheduler pings only the workers that announced themselves on their step socket: a worker that stops being
    pinged (its scheduler restarted and knows none) announces itself again and is registered by the new one."""
    addr = f"tcp://127.0.0.1:{free_port(pair=True)}"
    config = SchedulerConfig(ping_interval_s=0.05, worker_timeout_s=0.5)
    link = WorkerLink(addr, "127.0.0.1")
    engine = Engine(config, CARD, link, Metrics(CollectorRegistry()))
    engine.start()
    worker = FakeWorkerProcess(addr, "a", 64)
    try:
        await asyncio.wait_for(engine.alive_event.wait(), 5)
        await engine.stop()
        link.close()
        link = await _bind_again(addr)
        engine = Engine(config, CARD, link, Metrics(CollectorRegistry()))
        engine.start()
        await asyncio.wait_for(engine.alive_event.wait(), 5)
        # (a hello answering the old scheduler's ping, queued in the worker's PUSH, may register it first)
        await _wait_for(lambda: link.workers == {b"a"})
        assert link.serving == "a"
        await _serve_all(engine, "r")
    finally:
        await engine.stop()
        worker.kill()
        link.close()


async def test_an_unprompted_hello_of_another_release_is_refused_and_said_once(caplog):
    """A worker of another release (another SOCKETS, proto/wire_version.py) cannot connect its step socket to this
    scheduler's, so it is never pinged: its first, unprompted hello is the one place to say why it is not used."""
    engine, link = await make_engine()
    with caplog.at_level(logging.ERROR, logger="sparkinfer.scheduler"):
        for _ in range(2):
            link.inbox.put_nowait(hello("old", 0, wire_version="0123456789abcdef"))
        await asyncio.sleep(0.1)
    refusals = [r.getMessage() for r in caplog.records if "wire version" in r.getMessage()]
    assert len(refusals) == 1 and "worker old speaks wire version 0123456789abcdef" in refusals[0]
    assert engine.worker_id == "w1"
    await engine.stop()


def test_the_wire_version_covers_the_socket_types(monkeypatch):
    from proto import wire_version

    before = wire_version.wire_version()
    monkeypatch.setattr(wire_version, "SOCKETS", "steps and pings: scheduler PUSH -> worker PULL; results ...")
    assert wire_version.wire_version() != before


async def test_a_serving_worker_that_exits_is_lost_at_the_next_ping_not_after_the_silence():
    """A worker process that exits closes its connections: the next ping to it fails (EHOSTUNREACH) and the engine
    counts it lost then, with worker_timeout_s (here 30 s) left for silence alone. With only the silence to go by, a
    0.8 s default failed every request of a live worker whose I/O thread a loaded host held back that long."""
    addr = f"tcp://127.0.0.1:{free_port(pair=True)}"
    link = WorkerLink(addr, "127.0.0.1")
    engine = Engine(SchedulerConfig(ping_interval_s=0.05, worker_timeout_s=30.0), CARD, link,
                    Metrics(CollectorRegistry()))
    engine.start()
    worker = FakeWorkerProcess(addr, "a", 64)
    try:
        await asyncio.wait_for(engine.alive_event.wait(), 5)
        await _serve_all(engine, "r")
        assert not link.serving_gone
        worker.kill()
        started = asyncio.get_running_loop().time()
        await _wait_for(lambda: not engine.worker_alive, timeout=5.0)
        assert asyncio.get_running_loop().time() - started < 2.0
        again = FakeWorkerProcess(addr, "b", 32)
        await asyncio.wait_for(engine.alive_event.wait(), 5)
        assert engine.worker_id == "b" and not link.serving_gone
        await _serve_all(engine, "s")
        again.kill()
    finally:
        await engine.stop()
        if worker.thread.is_alive():
            worker.kill()
        link.close()
