"""End to end: `python -m deploy.launch` (what `make run` runs) serves, stops cleanly, and stops all when one dies."""
import os
import signal
import subprocess
import sys

import httpx
import pytest

from tests.e2e.stack import DEFAULT_MODEL, REPO, free_port


@pytest.fixture
def launch():
    if not os.path.isfile(os.path.join(DEFAULT_MODEL, "config.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    port = free_port()
    env = dict(os.environ, SPARKINFER_PORT=str(port), SPARKINFER_GRPC_PORT=str(free_port()),
               SPARKINFER_SCHEDULER_METRICS_PORT=str(free_port()),
               SPARKINFER_WORKER_ADDR=f"tcp://127.0.0.1:{free_port(pair=True)}", SPARKINFER_NUM_THREADS="1")
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


def test_a_dead_worker_stops_the_rest_with_an_error(launch):
    proc, _, banner = launch
    assert "SparkInfer is serving" in banner
    kids = children_of(proc.pid)
    worker = next(pid for pid, args in kids if "worker.server" in args)
    os.kill(int(worker), signal.SIGKILL)
    output = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 1 and "worker exited with code -9; stopping the rest" in output
    assert all(subprocess.run(["kill", "-0", pid], capture_output=True).returncode != 0 for pid, _ in kids)
