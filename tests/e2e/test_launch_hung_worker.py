"""End to end: `python -m deploy.launch` kills and restarts a worker that the scheduler counts dead while its process
still runs (SIGSTOP stands in for a hung worker: it misses its pings, as one stuck past SPARKINFER_STEP_TIMEOUT_S
misses its step), and the stack serves again. Before the watchdog the launcher restarted only a worker that exited,
so /health stayed 503 worker_down until someone killed it by hand."""
import os
import select
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.e2e.stack import DEFAULT_MODEL, REPO, free_port
from tests.e2e.test_openai_launch import _pid_of


@pytest.fixture
def launch():
    if not os.path.isfile(os.path.join(DEFAULT_MODEL, "config.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    port = free_port()
    env = dict(os.environ, SPARKINFER_PORT=str(port), SPARKINFER_GRPC_PORT=str(free_port()),
               SPARKINFER_SCHEDULER_METRICS_PORT=str(free_port()), SPARKINFER_WORKER_HUNG_S="2",
               SPARKINFER_WORKER_ADDR=f"tcp://127.0.0.1:{free_port(pair=True)}", SPARKINFER_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "deploy.launch", "--model", DEFAULT_MODEL], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    banner = ""
    while "SparkInfer is serving" not in banner:
        line = proc.stdout.readline().decode()
        if not line:
            break
        banner = line
    yield proc, f"http://127.0.0.1:{port}", banner
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def read_until(proc, marker: str, timeout: float) -> list:
    """The launcher's output lines up to the first holding `marker`, or all it wrote within `timeout` seconds."""
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline and not (lines and marker in lines[-1]):
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        line = proc.stdout.readline().decode() if ready else ""
        if not line:
            break
        lines.append(line)
    return lines


def test_a_hung_worker_is_killed_restarted_and_the_stack_serves_again(launch):
    proc, url, banner = launch
    assert "SparkInfer is serving" in banner
    worker = _pid_of(proc, "worker.server")
    os.kill(worker, signal.SIGSTOP)
    lines = read_until(proc, "restarting it", 60)
    hung = [line for line in lines if "while the worker process runs" in line]
    assert hung and "killing it" in hung[0], lines
    assert lines and "worker exited with code -9; restarting it" in lines[-1], lines
    body = {"model": "tiny", "prompt": "Hi", "max_tokens": 4}
    deadline = time.monotonic() + 60
    while True:  # 503 while the new worker loads, then served again
        reply = httpx.post(f"{url}/v1/completions", json=body, timeout=30)
        if reply.status_code == 200 or time.monotonic() > deadline:
            break
        assert reply.status_code == 503, reply.text
        time.sleep(0.25)
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1
    assert _pid_of(proc, "worker.server") != worker and proc.poll() is None
