"""Launcher process: the hung-worker watchdog.

The scheduler declares its worker dead when the worker misses its pings (a stopped or deadlocked process) or a step
brings no result within SPARKINFER_STEP_TIMEOUT_S (a kernel that never returns while the I/O thread still answers);
/health then answers 503 with reason "worker_down". The process itself lives on, and the launcher restarted only a
worker that exited, so the stack stayed down until someone killed it by hand (vLLM's hung-engine reports, vllm#36960
and #45526). HungWorker.hung says when the launcher should kill it (the supervisor then restarts it as any dead
worker): the scheduler's Load (gRPC, as the gateway's /health asks it; not /health itself, whose every probe would
be an access-log line) has said no live worker for SPARKINFER_WORKER_HUNG_S seconds in a row (default HUNG_S; 0
turns the watchdog off) after the worker was live since its last start. A worker still loading its model is not
live to the scheduler either; it has not been live yet, so it is left alone.
"""
from __future__ import annotations

from typing import Callable, Optional

ENV = "SPARKINFER_WORKER_HUNG_S"
HUNG_S = 15.0
POLL_S = 2.0
_PROBE_TIMEOUT_S = 2.0


class SchedulerProbe:
    """The scheduler's view of its worker over one gRPC channel: None while a worker is live, "worker_down" when the
    scheduler has none, "unreachable" when the scheduler does not answer."""

    def __init__(self, address: str):
        self.address, self._stub = address, None

    def __call__(self) -> Optional[str]:
        import grpc

        from proto import pb, pb_grpc

        if self._stub is None:
            self._stub = pb_grpc.ServingStub(grpc.insecure_channel(self.address))
        try:
            load = self._stub.Load(pb.LoadRequest(), timeout=_PROBE_TIMEOUT_S)
        except grpc.RpcError:
            return "unreachable"
        return None if load.worker_alive else "worker_down"


class HungWorker:
    """Tracks the scheduler's view of the worker between the worker's (re)starts; `probe()` answers as
    SchedulerProbe does (injectable in tests)."""

    def __init__(self, probe: Callable[[], Optional[str]], grace_s: float):
        self.probe, self.grace_s = probe, grace_s
        self.served = False        # a live worker seen since the worker's last start
        self.down_since = None     # monotonic time of the first worker_down after it was live
        self.next_poll = 0.0

    def restarted(self) -> None:
        """A new worker process started: it must serve once before it can count as hung."""
        self.served, self.down_since = False, None

    def hung(self, now: float) -> bool:
        """Probes at most every POLL_S (now: time.monotonic()); True once the worker was live and the scheduler has
        said worker_down for grace_s since."""
        if self.grace_s <= 0 or now < self.next_poll:
            return False
        self.next_poll = now + POLL_S
        reason = self.probe()
        if reason is None:
            self.served, self.down_since = True, None
            return False
        if reason != "worker_down" or not self.served:
            self.down_since = None
            return False
        if self.down_since is None:
            self.down_since = now
        return now - self.down_since >= self.grace_s
