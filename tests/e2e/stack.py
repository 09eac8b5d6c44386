"""Test helper (test process): starts the real scheduler and worker processes on free loopback ports.

Usage: with EngineStack(model="models/tiny") as stack: ... stack.grpc_addr ...
Every process runs in its own process group and is killed on exit, even when the test fails.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MODEL = os.path.join(REPO, "models", "tiny")


def free_port(pair: bool = False) -> int:
    """A free loopback TCP port; with pair, one whose successor is free too (ZeroMQ step + result ports)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not pair or port >= 65535:
            return port
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair found")


class EngineStack:
    """One scheduler + one worker. Attributes: grpc_addr ("127.0.0.1:port"), metrics_port, worker_addr."""

    def __init__(self, model: str = DEFAULT_MODEL, env: dict | None = None, worker_env: dict | None = None):
        self.model = model
        self.grpc_port, self.metrics_port = free_port(), free_port()
        self.grpc_addr = f"127.0.0.1:{self.grpc_port}"
        self.worker_addr = f"tcp://127.0.0.1:{free_port(pair=True)}"
        self.log_dir = tempfile.mkdtemp(prefix="sparkinfer-e2e-")
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", SPARKINFER_MODEL=model,
                        SPARKINFER_GRPC_HOST="127.0.0.1", SPARKINFER_GRPC_PORT=str(self.grpc_port),
                        SPARKINFER_SCHEDULER_METRICS_PORT=str(self.metrics_port),
                        SPARKINFER_WORKER_ADDR=self.worker_addr, SPARKINFER_NUM_THREADS="1", **(env or {}))
        self.worker_env = worker_env or {}
        self.scheduler = self.worker = None
        self._num_workers = 0

    def _spawn(self, module: str, name: str, extra_env: dict) -> subprocess.Popen:
        log = open(os.path.join(self.log_dir, f"{name}.log"), "wb")
        return subprocess.Popen([sys.executable, "-m", module], cwd=REPO, env=dict(self.env, **extra_env),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start_scheduler(self) -> None:
        self.scheduler = self._spawn("scheduler.server", "scheduler", {})

    def start_worker(self) -> None:
        self._num_workers += 1
        self.worker = self._spawn("worker.server", f"worker{self._num_workers}", self.worker_env)

    def kill_worker(self) -> None:
        kill(self.worker, signal.SIGKILL)

    def health(self, timeout: float = 1.0) -> int:
        """grpc.health.v1 status of the whole server (health_pb2.HealthCheckResponse.*)."""
        with grpc.insecure_channel(self.grpc_addr) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            return stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout).status

    def wait_serving(self, timeout: float = 60.0) -> None:
        """Waits until health says SERVING; raises RuntimeError with the process logs otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in (self.scheduler, self.worker):
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"process exited with {proc.returncode}\n{self.logs()}")
            try:
                if self.health() == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"stack not SERVING after {timeout} s\n{self.logs()}")

    def logs(self) -> str:
        parts = []
        for name in sorted(os.listdir(self.log_dir)):
            with open(os.path.join(self.log_dir, name), "rb") as f:
                parts.append(f"--- {name}\n" + f.read()[-4000:].decode(errors="replace"))
        return "\n".join(parts)

    def __enter__(self) -> "EngineStack":
        try:
            self.start_scheduler()
            self.start_worker()
            self.wait_serving()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for proc in (self.worker, self.scheduler):
            kill(proc, signal.SIGTERM)
        for proc in (self.worker, self.scheduler):
            kill(proc, signal.SIGKILL, wait=2.0)

    def __exit__(self, *exc) -> None:
        self.close()


def kill(proc, sig=signal.SIGKILL, wait: float = 5.0) -> None:
    """Signals proc's whole process group (it was started in its own session) and reaps it."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        if sig != signal.SIGKILL:
            return
        raise
