"""Bench helper (the process of bench/serve_http.py): runs the whole stack as `make run` does (deploy/launch.py:
scheduler, worker, gateway) on free loopback ports, waits for /v1/models, stops every process it started, and reads
the scheduler's load gauges from its /metrics."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.stack import REPO, die_with_parent, free_port, free_ports

GAUGES = ("sparkinfer_num_requests_running", "sparkinfer_num_requests_waiting")
_STOP_S = 30.0


def _children(pid: int) -> list:
    """Process ids of pid's children (Linux /proc; [] elsewhere)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


class ServeStack:
    """deploy/launch.py with its own ports; `base` is the gateway URL, `served` the model id, `log_path` the stack's
    output. Use as a context manager: leaving it (also by an exception or Ctrl-C) stops and reaps everything."""

    def __init__(self, model: str, env: dict, log_path: str, start_timeout: float = 600.0):
        self.model, self.log_path, self.start_timeout = model, log_path, start_timeout
        http, grpc_port, metrics = free_ports(3)
        self.base, self.metrics_url = f"http://127.0.0.1:{http}", f"http://127.0.0.1:{metrics}/metrics"
        # the caller's environment wins over the bench's defaults, except for the ports
        self.env = {"SPARKINFER_DRAIN_GRACE_S": "2"}
        self.env.update(os.environ)
        self.env.update(env)
        self.env.update(PYTHONUNBUFFERED="1", SPARKINFER_PORT=str(http), SPARKINFER_GRPC_PORT=str(grpc_port),
                        SPARKINFER_SCHEDULER_ADDR=f"127.0.0.1:{grpc_port}",
                        SPARKINFER_SCHEDULER_METRICS_PORT=str(metrics), SPARKINFER_HOST="127.0.0.1",
                        SPARKINFER_GRPC_HOST="127.0.0.1", SPARKINFER_WORKER_ADDR=f"tcp://127.0.0.1:{free_port(True)}")
        self.proc, self.served = None, None

    def __enter__(self) -> "ServeStack":
        log = open(self.log_path, "wb")
        argv = [sys.executable, "-m", "deploy.launch", "--model", self.model, "--wait-timeout", str(self.start_timeout)]
        self.proc = subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=die_with_parent)
        log.close()
        try:
            self.served = self._wait_models()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _wait_models(self) -> str:
        """Polls /health and /v1/models until both answer 200; returns the served model id. Raises RuntimeError
        with the log's tail when the launcher exits or the time is up."""
        deadline, start = time.monotonic() + self.start_timeout, time.monotonic()
        last_note = start
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the stack exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                _get(self.base + "/health", 2.0)  # 503 (an HTTPError) until the worker is up
                return json.loads(_get(self.base + "/v1/models", 2.0))["data"][0]["id"]
            except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError):
                pass
            if time.monotonic() - last_note > 30:
                last_note = time.monotonic()
                print(f"  waiting for the stack: {last_note - start:.0f} s; {self.log_tail(1).strip()}", flush=True)
            time.sleep(0.5)
        raise RuntimeError(f"/v1/models did not answer within {self.start_timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        with open(self.log_path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])

    def log_line(self, marker: str) -> str:
        """The stack log's last line holding `marker` ("" when none)."""
        with open(self.log_path, "rb") as f:
            found = [line for line in f.read().decode(errors="replace").splitlines() if marker in line]
        return found[-1] if found else ""

    def gauges(self) -> dict:
        """The scheduler's running / waiting gauges (its /metrics, read with prometheus_client's parser)."""
        text = _get(self.metrics_url).decode()
        return {sample.name: sample.value for family in text_string_to_metric_families(text)
                for sample in family.samples if sample.name in GAUGES}

    def stop(self) -> None:
        """SIGTERM to the launcher (it stops gateway, worker, scheduler in order); a launcher still there after
        _STOP_S is killed, and so are its children."""
        if self.proc is None:
            return
        kids = _children(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=_STOP_S)
                kids = []  # the launcher stopped and reaped them itself
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None
