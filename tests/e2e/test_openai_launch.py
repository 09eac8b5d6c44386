"""End to end: `python -m deploy.launch` (what `make run` runs) serves, stops cleanly (the gateway drains first),
restarts a dead worker, kills and restarts a hung one, stops all when the scheduler dies, and takes its children
down when it is killed."""
import contextlib
import os
import select
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.e2e.stack import DEFAULT_MODEL, REPO, free_port


def start_launcher(extra_env: dict):
    """deploy.launch on free ports; yields (process, gateway URL, the banner line it printed once healthy, or its last
    line) and kills its process group after."""
    if not os.path.isfile(os.path.join(DEFAULT_MODEL, "config.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    port = free_port()
    env = dict(os.environ, SPARKINFER_PORT=str(port), SPARKINFER_GRPC_PORT=str(free_port()),
               SPARKINFER_SCHEDULER_METRICS_PORT=str(free_port()),
               SPARKINFER_WORKER_ADDR=f"tcp://127.0.0.1:{free_port(pair=True)}", SPARKINFER_NUM_THREADS="1",
               **extra_env)
    proc = subprocess.Popen([sys.executable, "-m", "deploy.launch", "--model", DEFAULT_MODEL], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    # The launcher prints its URL once /health answers 200; read until then (or until it exits).
    banner = ""
    while "SparkInfer is serving" not in banner:
        line = proc.stdout.readline().decode()
        if not line:
            break
        banner = line
    yield proc, url, banner
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture
def launch():
    yield from start_launcher({})


@pytest.fixture
def launch_hung_2s():
    """The launcher with its hung-worker watchdog at 2 s (SPARKINFER_WORKER_HUNG_S)."""
    yield from start_launcher({"SPARKINFER_WORKER_HUNG_S": "2"})


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


def served_again(url: str, timeout: float = 60) -> httpx.Response:
    """Completions until one is served (503 while a new worker loads) or `timeout` seconds pass; the last reply."""
    body = {"model": "tiny", "prompt": "Hi", "max_tokens": 4}
    deadline = time.monotonic() + timeout
    while True:
        reply = httpx.post(f"{url}/v1/completions", json=body, timeout=30)
        if reply.status_code == 200 or time.monotonic() > deadline:
            return reply
        assert reply.status_code == 503, reply.text
        time.sleep(0.25)


def children_of(pid: int) -> list:
    out = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [line.split(None, 1) for line in out.strip().splitlines()]


def test_serves_then_ctrl_c_stops_all_three(launch):
    proc, url, banner = launch
    assert f"serving {DEFAULT_MODEL} at {url}/v1" in banner
    reply = httpx.post(f"{url}/v1/completions", json={"model": "tiny", "prompt": "Hi", "max_tokens": 4}, timeout=30)
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1
    kids = children_of(proc.pid)
    assert sorted(args.split()[2] for _, args in kids) == ["gateway.app", "scheduler.server", "worker.server"]
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0 and "SIGINT received, stopping gateway, worker and scheduler" in output
    assert all(subprocess.run(["kill", "-0", pid], capture_output=True).returncode != 0 for pid, _ in kids)


def test_a_closed_terminal_stops_all_three_in_order(launch):
    """SIGHUP (the terminal closed) killed the launcher outright; its children went on PDEATHSIG, all at once."""
    proc, _, banner = launch
    assert "SparkInfer is serving" in banner
    kids = children_of(proc.pid)
    proc.send_signal(signal.SIGHUP)
    output = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0 and "launch: SIGHUP received, stopping gateway, worker and scheduler" in output
    assert all(subprocess.run(["kill", "-0", pid], capture_output=True).returncode != 0 for pid, _ in kids)


def test_sigterm_lets_a_stream_in_flight_finish_first(launch):
    proc, url, banner = launch
    assert "SparkInfer is serving" in banner
    kids = children_of(proc.pid)
    body = {"model": "tiny", "messages": [{"role": "user", "content": "count"}], "max_tokens": 120, "ignore_eos": True,
            "stream": True}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=60) as stream:
        lines = stream.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
        # The gateway drains while the worker and scheduler still run: they stop only once it has exited.
        proc.send_signal(signal.SIGTERM)
        rest = [line for line in lines if line.startswith("data: ")]
    assert rest[-1] == "data: [DONE]" and '"finish_reason":"length"' in rest[-2]
    output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0 and "SIGTERM received, stopping gateway, worker and scheduler" in output
    assert all(subprocess.run(["kill", "-0", pid], capture_output=True).returncode != 0 for pid, _ in kids)


def _pid_of(proc, name: str) -> int:
    return int(next(pid for pid, args in children_of(proc.pid) if name in args))


def test_a_dead_worker_is_restarted_and_the_stack_serves_again(launch):
    proc, url, banner = launch
    assert "SparkInfer is serving" in banner
    worker = _pid_of(proc, "worker.server")
    os.kill(worker, signal.SIGKILL)
    lines = read_until(proc, "restarting it", 60)
    assert lines and "worker exited with code -9; restarting it" in lines[-1], lines
    reply = served_again(url)
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1
    assert _pid_of(proc, "worker.server") != worker and proc.poll() is None


def test_a_hung_worker_is_killed_restarted_and_the_stack_serves_again(launch_hung_2s):
    """SIGSTOP stands in for a hung worker (it misses its pings, as one stuck past SPARKINFER_STEP_TIMEOUT_S misses
    its step): the scheduler counts it dead while its process runs; before the watchdog the launcher restarted only a
    worker that exited, so the stack stayed down."""
    proc, url, banner = launch_hung_2s
    assert "SparkInfer is serving" in banner
    worker = _pid_of(proc, "worker.server")
    os.kill(worker, signal.SIGSTOP)
    try:
        lines = read_until(proc, "restarting it", 60)
        hung = [line for line in lines if "while the worker process runs" in line]
        assert hung and "killing it" in hung[0], lines
        assert "worker exited with code -9; restarting it" in lines[-1], lines
        reply = served_again(url)
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1
        assert _pid_of(proc, "worker.server") != worker and proc.poll() is None
    finally:
        # A stopped process ignores the SIGTERM its launcher's death sends (PR_SET_PDEATHSIG): if the watchdog did not
        # kill it, nothing else would.
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)


def test_a_dead_scheduler_stops_the_rest_with_an_error(launch):
    proc, _, banner = launch
    assert "SparkInfer is serving" in banner
    kids = children_of(proc.pid)
    os.kill(_pid_of(proc, "scheduler.server"), signal.SIGKILL)
    output = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 1 and "scheduler exited with code -9; stopping the rest" in output
    assert all(subprocess.run(["kill", "-0", pid], capture_output=True).returncode != 0 for pid, _ in kids)


def test_children_die_with_a_killed_launcher(launch):
    proc, _, banner = launch
    assert "SparkInfer is serving" in banner
    kids = children_of(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)  # no chance to clean up: the kernel tells the children
    proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(pid) for pid, _ in kids):
        time.sleep(0.2)
    assert not any(_alive(pid) for pid, _ in kids)


def _alive(pid: str) -> bool:
    state = subprocess.run(["ps", "-o", "stat=", "-p", pid], capture_output=True, text=True).stdout.strip()
    return bool(state) and not state.startswith("Z")
