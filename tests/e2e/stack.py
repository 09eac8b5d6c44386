"""Test helper (test process): starts the real scheduler and worker processes on free loopback ports.

Usage: with EngineStack(model="models/tiny") as stack: ... stack.grpc_addr ...
Every process runs in its own process group and is killed on exit, even when the test fails.
"""
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MODEL = os.path.join(REPO, "models", "tiny")
PR_SET_PDEATHSIG = 1


def free_port(pair: bool = False) -> int:
    """A free loopback TCP port; with pair, one whose successor is free too (ZeroMQ step + result ports)."""
    return free_ports(1 + pair, consecutive=pair)[0]


def free_ports(count: int, consecutive: bool = False) -> list:
    """`count` distinct free loopback ports (consecutive ones if asked), all held open until chosen."""
    held = []
    try:
        for _ in range(200):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
            ports = sorted(h.getsockname()[1] for h in held)
            if not consecutive and len(ports) >= count:
                return ports[:count]
            # the port just bound, a fresh candidate each time (the largest one held got stuck when its successor was
            # taken: "no 2 free ports found" after a long run left ports in TIME_WAIT, session 13)
            first = s.getsockname()[1]
            if consecutive and _bind_run(held, first, count):
                return list(range(first, first + count))
    finally:
        for s in held:
            s.close()
    raise RuntimeError(f"no {count} free ports found")


def _bind_run(held: list, first: int, count: int) -> bool:
    for port in range(first + 1, first + count):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            return False
        held.append(s)
    return True


class EngineStack:
    """One scheduler + one worker. Attributes: grpc_addr ("127.0.0.1:port"), metrics_port, worker_addr."""

    def __init__(self, model: str = DEFAULT_MODEL, env: dict | None = None, worker_env: dict | None = None):
        self.model = model
        self.log_dir = tempfile.mkdtemp(prefix="sparkinfer-e2e-")
        self.extra_env = env or {}
        self.worker_env = worker_env or {}
        self.scheduler = self.worker = None
        self._num_workers = 0
        self.pick_ports()

    def pick_ports(self) -> None:
        """Chooses fresh ports (gRPC, metrics, ZeroMQ pair) and the environment both processes get."""
        self.grpc_port, self.metrics_port = free_ports(2)
        self.grpc_addr = f"127.0.0.1:{self.grpc_port}"
        self.worker_addr = f"tcp://127.0.0.1:{free_port(pair=True)}"
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", SPARKINFER_MODEL=self.model,
                        SPARKINFER_GRPC_HOST="127.0.0.1", SPARKINFER_GRPC_PORT=str(self.grpc_port),
                        SPARKINFER_SCHEDULER_METRICS_PORT=str(self.metrics_port),
                        SPARKINFER_WORKER_ADDR=self.worker_addr, SPARKINFER_NUM_THREADS="1", **self.extra_env)

    def _spawn(self, module: str, name: str, extra_env: dict) -> subprocess.Popen:
        log = open(os.path.join(self.log_dir, f"{name}.log"), "wb")
        return subprocess.Popen([sys.executable, "-m", module], cwd=REPO, env=dict(self.env, **extra_env),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=die_with_parent)

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
        for attempt in range(3):
            try:
                self.start_scheduler()
                self.start_worker()
                self.wait_serving()
                return self
            except RuntimeError as exc:
                self.close()
                # A free port can be taken (e.g. as a client's ephemeral port) before the scheduler binds it.
                if attempt == 2 or not any(s in str(exc) for s in ("Failed to bind", "Address already in use")):
                    raise
                self.pick_ports()
            except BaseException:
                self.close()
                raise
        return self

    def close(self) -> None:
        for proc in (self.worker, self.scheduler):
            kill(proc, signal.SIGTERM)
        for proc in (self.worker, self.scheduler):
            kill(proc, signal.SIGKILL, wait=10.0)

    def __exit__(self, *exc) -> None:
        self.close()


def die_with_parent() -> None:
    """Runs in the child before exec: the kernel kills it if the test process dies (even by SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux: fixtures' finalizers still clean up


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
        # SIGTERM ignored in time: the caller follows with SIGKILL. SIGKILLed but not reaped yet (a worker freeing
        # gigabytes on a loaded 2-core box can take seconds): the kernel finishes it; a teardown error would only
        # hide the test's own result.
        return


class GatewayProcess:
    """`python -m gateway.app` on a free loopback port, pointed at a running EngineStack."""

    def __init__(self, stack, env: dict = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(stack.log_dir, "gateway.log")
        env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gateway.app", "--port", str(self.port), "--scheduler-addr", stack.grpc_addr],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if urllib.request.urlopen(f"{self.url}/health", timeout=2).status == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"gateway not ready\n{open(self.log_path, errors='replace').read()[-4000:]}")

    def close(self) -> None:
        kill(self.proc)


@contextlib.contextmanager
def running_gateway(stack, env: dict = None):
    """A GatewayProcess over `stack` (extra environment `env`), ready; yields its base URL and stops it after."""
    gateway = GatewayProcess(stack, env)
    try:
        gateway.wait_ready()
        yield gateway.url
    finally:
        gateway.close()
