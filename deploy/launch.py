"""Launcher process (`make run`): starts scheduler, worker and gateway as three children, restarts a dead worker (and
kills a hung one first: deploy/watchdog.py), stops them together."""
from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Optional

from deploy import preflight, watchdog
from gateway.config import GatewayConfig, env_number

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STOP_GRACE_S = 10.0
# A dead worker is restarted (the scheduler fails its in-flight requests with 503 and serves again once the new
# worker says hello); more than _MAX_RESTARTS deaths within _RESTART_WINDOW_S means it cannot start: stop all.
RESTARTABLE = ("worker",)
_MAX_RESTARTS = 5
_RESTART_WINDOW_S = 60.0
_PR_SET_PDEATHSIG = 1


@dataclass
class Child:
    name: str
    argv: list
    proc: Optional[subprocess.Popen] = None


def parse_args(argv=None) -> argparse.Namespace:
    # README's Configuration: the three processes take their settings from the environment this launcher passes on.
    # No usage block before an error: a bad SPARKINFER_* value stops the start with one line.
    parser = argparse.ArgumentParser(
        prog="python -m deploy.launch", usage=argparse.SUPPRESS,
        description="Run scheduler + worker + gateway locally (what compose.yaml runs).",
        epilog="Every SPARKINFER_* variable in the environment reaches the three processes (SPARKINFER_PORT=8081 serves "
               "on port 8081); each one's variables and flags: python -m gateway.app --help, python -m "
               "scheduler.server --help, python -m worker.server --help.")
    parser.add_argument("--model", default=os.environ.get("SPARKINFER_MODEL", "models/tiny"),
                        help="checkpoint folder (SPARKINFER_MODEL; default models/tiny)")
    parser.add_argument("--wait-timeout", type=float, default=env_number(parser, "SPARKINFER_LAUNCH_TIMEOUT_S", 600),
                        help="seconds to wait for the stack to become healthy (SPARKINFER_LAUNCH_TIMEOUT_S, "
                             "default 600)")
    parser.add_argument("--worker-hung-s", type=float, default=env_number(parser, watchdog.ENV, watchdog.HUNG_S),
                        help=f"kill and restart a worker the scheduler has counted dead this long while its process "
                             f"runs ({watchdog.ENV}, default {watchdog.HUNG_S:g}; 0: never)")
    args = parser.parse_args(argv)
    # <= 0 or nan started the three processes only to stop them at once ("not healthy after -1 s")
    if not (math.isfinite(args.wait_timeout) and args.wait_timeout > 0):
        parser.error(f"--wait-timeout (SPARKINFER_LAUNCH_TIMEOUT_S): {args.wait_timeout!r} must be a number of "
                     f"seconds > 0")
    # -1 or nan read as "never" without a word, where README gives 0 for that
    if not (math.isfinite(args.worker_hung_s) and args.worker_hung_s >= 0):
        parser.error(f"--worker-hung-s ({watchdog.ENV}): {args.worker_hung_s!r} must be a number of seconds >= 0 "
                     f"(0 = never)")
    return args


def stack_env(model: str) -> dict:
    """The environment compose.yaml gives the three services, with loopback addresses."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", SPARKINFER_MODEL=model)
    env.setdefault("SPARKINFER_GRPC_HOST", "127.0.0.1")
    env.setdefault("SPARKINFER_GRPC_PORT", "50051")
    env.setdefault("SPARKINFER_SCHEDULER_ADDR", f"127.0.0.1:{env['SPARKINFER_GRPC_PORT']}")
    env.setdefault("SPARKINFER_WORKER_ADDR", "tcp://127.0.0.1:5557")
    env.setdefault("SPARKINFER_MAX_QUEUE_DEPTH", "0")
    env.setdefault("SPARKINFER_HOST", "127.0.0.1")
    env.setdefault("SPARKINFER_PORT", "8080")
    return env


def children(model: str) -> list[Child]:
    py = sys.executable
    return [Child("scheduler", [py, "-m", "scheduler.server", "--model", model]),
            Child("worker", [py, "-m", "worker.server", "--model", model]),
            Child("gateway", [py, "-m", "gateway.app"])]


def _die_with_parent() -> None:
    """Runs in the child before exec: on Linux, SIGTERM it when the launcher dies, even by SIGKILL or OOM."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: a killed launcher leaves its children to the user


def start(child: Child, env: dict) -> None:
    # Own session: Ctrl-C reaches only the launcher, which then stops the children in order.
    child.proc = subprocess.Popen(child.argv, cwd=REPO, env=env, start_new_session=True,
                                  preexec_fn=_die_with_parent)


def dead(kids: list[Child]) -> Optional[Child]:
    return next((c for c in kids if c.proc is not None and c.proc.poll() is not None), None)


def drain_grace_s(env: dict) -> float:
    """How long the gateway drains on SIGTERM (its SPARKINFER_DRAIN_GRACE_S)."""
    try:
        return float(env.get("SPARKINFER_DRAIN_GRACE_S") or GatewayConfig.drain_grace_s)
    except ValueError:
        # the gateway refuses such a value at its start
        return GatewayConfig.drain_grace_s


def _stop(kids: list[Child], grace_s: float) -> None:
    """SIGTERMs each running child of kids and waits up to grace_s for all of them; SIGKILLs those still there."""
    for child in kids:
        if child.proc is not None and child.proc.poll() is None:
            child.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for child in kids:
        if child.proc is None:
            continue
        try:
            child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"launch: {child.name} did not stop in {grace_s:.0f} s, killing it", flush=True)
            child.proc.kill()
            child.proc.wait()


def stop_all(kids: list[Child], drain_s: float) -> None:
    """Stops the gateway first, giving it drain_s to finish the requests in flight (they need the worker and the
    scheduler until then), then the worker and the scheduler. A second Ctrl-C (Stop) kills whatever is left at once."""
    by_name = {child.name: child for child in kids}
    try:
        _stop([by_name["gateway"]], drain_s + _STOP_GRACE_S)
        _stop([by_name["worker"], by_name["scheduler"]], _STOP_GRACE_S)
    except Stop:
        print("launch: second signal, killing gateway, worker and scheduler", flush=True)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        for child in kids:
            if child.proc is not None and child.proc.poll() is None:
                child.proc.kill()
                child.proc.wait()


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


class Stop(Exception):
    """Raised by the signal handler: a clean shutdown was asked for."""


def _on_signal(signum, frame):
    raise Stop(signal.Signals(signum).name)


def wait_healthy(kids: list[Child], url: str, timeout: float) -> Optional[str]:
    """None once /health answers 200; otherwise the reason it never did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gone = dead(kids)
        if gone is not None:
            return f"{gone.name} exited with code {gone.proc.returncode} during start-up"
        if healthy(url):
            return None
        time.sleep(0.25)
    return f"the stack was not healthy after {timeout:.0f} s ({url})"


def supervise(kids: list[Child], env: dict, watch: watchdog.HungWorker) -> int:
    """Restarts a dead worker (killing one `watch` finds hung); returns 1 when the scheduler or gateway dies or the
    worker keeps dying; raises Stop when a signal asks to stop."""
    deaths = []
    while True:
        gone = dead(kids)
        if gone is None:
            if watch.hung(time.monotonic()):
                kill_hung(next(kid for kid in kids if kid.name == "worker"), watch.grace_s)
            time.sleep(0.5)
            continue
        now = time.monotonic()
        deaths = [t for t in deaths if now - t < _RESTART_WINDOW_S] + [now]
        if gone.name not in RESTARTABLE or len(deaths) > _MAX_RESTARTS:
            print(f"launch: {gone.name} exited with code {gone.proc.returncode}; stopping the rest", flush=True)
            return 1
        print(f"launch: {gone.name} exited with code {gone.proc.returncode}; restarting it "
              f"({len(deaths)} of {_MAX_RESTARTS} restarts in {_RESTART_WINDOW_S:.0f} s)", flush=True)
        start(gone, env)
        watch.restarted()


def kill_hung(worker: Child, grace_s: float) -> None:
    """SIGKILL for a worker process the scheduler has counted dead for grace_s (the supervisor restarts it)."""
    print(f"launch: the scheduler has had no live worker for {grace_s:.0f} s while the worker process runs (hung: "
          f"{watchdog.ENV}); killing it", flush=True)
    worker.proc.kill()
    worker.proc.wait()


def base_url(env: dict) -> str:
    """The gateway's URL as a client on this machine reaches it (a wildcard host through loopback; an IPv6 host in
    brackets: http://::1:8080 was no URL, so the health probe never passed)."""
    host = env["SPARKINFER_HOST"]
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{env['SPARKINFER_PORT']}"


def main(argv=None) -> int:
    args = parse_args(argv)
    env = stack_env(args.model)
    faults = preflight.problems(env, args.model, REPO)
    if faults:
        print("\n".join(f"launch: {fault}" for fault in faults), file=sys.stderr, flush=True)
        return 1
    kids = children(args.model)
    # SIGHUP: the terminal closed. Unhandled, it killed the launcher at once and the children went on PDEATHSIG all
    # together (the gateway's requests in flight lost the worker under them) instead of gateway first.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    base = base_url(env)
    code = 0
    try:
        for child in kids:
            start(child, env)
        problem = wait_healthy(kids, base + "/health", args.wait_timeout)
        if problem is not None:
            print(f"launch: {problem}; stopping", flush=True)
            code = 1
        else:
            print(f"\nSparkInfer is serving {args.model} at {base}/v1  (OpenAI API; Ctrl-C stops it)\n", flush=True)
            probe = watchdog.SchedulerProbe(env["SPARKINFER_SCHEDULER_ADDR"])
            code = supervise(kids, env, watchdog.HungWorker(probe, args.worker_hung_s))
    except Stop as stop:
        print(f"launch: {stop} received, stopping gateway, worker and scheduler", flush=True)
    finally:
        stop_all(kids, drain_grace_s(env))
    return code


if __name__ == "__main__":
    sys.exit(main())
