"""Launcher process: the hung-worker watchdog.

The scheduler declares its worker dead when the worker misses its pings (a stopped or deadlocked process) or a step
brings no result within SPARKINFER_STEP_TIMEOUT_S (a kernel that never returns while the I/O thread still answers);
/health then answers 503 with reason "worker_down". The process itself lives on, and the launcher restarted only a
worker that exited, so the stack stayed down until someone killed it by hand (vLLM's hung-engine reports, vllm#36960
and #45526). HungWorker.hung says when the launcher should kill it (the supervisor then restarts it as any dead
worker): /health has said worker_down for SPARKINFER_WORKER_HUNG_S seconds in a row (default HUNG_S; 0 turns the
watchdog off) after the worker served since its last start. A worker still loading its model is "down" to the
scheduler too; it has not served yet, so it is left alone.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Callable, Optional

ENV = "SPARKINFER_WORKER_HUNG_S"
HUNG_S = 15.0
POLL_S = 2.0
_PROBE_TIMEOUT_S = 3.0  # /health waits up to 2 s for the scheduler's answer


def health_reason(url: str) -> Optional[str]:
    """None when GET url (the gateway's /health) answers 200; else the reason its 503 body gives ("worker_down",
    "scheduler_unreachable", ...), or "unreachable" when no answer comes."""
    try:
        with urllib.request.urlopen(url, timeout=_PROBE_TIMEOUT_S) as response:
            return None if response.status == 200 else f"status {response.status}"
    except urllib.error.HTTPError as error:
        try:
            return json.loads(error.read() or b"{}").get("reason") or f"status {error.code}"
        except ValueError:
            return f"status {error.code}"
    except (urllib.error.URLError, OSError):
        return "unreachable"


class HungWorker:
    """Tracks /health between the worker's (re)starts; `probe` returns health_reason's answer (injectable in tests)."""

    def __init__(self, url: str, grace_s: float, probe: Callable[[str], Optional[str]] = health_reason):
        self.url, self.grace_s, self.probe = url, grace_s, probe
        self.served = False        # /health answered 200 since the worker's last start
        self.down_since = None     # monotonic time of the first worker_down after it served
        self.next_poll = 0.0

    def restarted(self) -> None:
        """A new worker process started: it must serve once before it can count as hung."""
        self.served, self.down_since = False, None

    def hung(self, now: float) -> bool:
        """Polls /health at most every POLL_S (now: time.monotonic()); True once the worker served and /health has
        said worker_down for grace_s since."""
        if self.grace_s <= 0 or now < self.next_poll:
            return False
        self.next_poll = now + POLL_S
        reason = self.probe(self.url)
        if reason is None:
            self.served, self.down_since = True, None
            return False
        if reason != "worker_down" or not self.served:
            self.down_since = None
            return False
        if self.down_since is None:
            self.down_since = now
        return now - self.down_since >= self.grace_s
