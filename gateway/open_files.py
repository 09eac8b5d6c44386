"""Gateway process: the open-file limit its connections need, and one log line (not a flood) when it runs out.

Each client connection is a file descriptor. Under the common default soft limit (1024) a thousand concurrent
clients ran the gateway out of descriptors; asyncio then logs "socket.accept() out of system resource" with a
traceback for every connection waiting in the listen backlog, and (CPython 3.11-3.13, python/cpython#151615) its
accept loop goes on after the error, scheduling a retry each time: tens of thousands of tracebacks a minute, taking
the CPU the connections already open need and filling the disk.
"""
from __future__ import annotations

import asyncio
import logging
import resource
import time

log = logging.getLogger("sparkinfer.gateway")

ACCEPT_EXHAUSTED = "socket.accept() out of system resource"
# At most one line per this many seconds while descriptors stay exhausted.
ACCEPT_LOG_INTERVAL_S = 10.0


def raise_open_files_limit() -> tuple[int, int]:
    """Raises the soft RLIMIT_NOFILE to the hard limit, as Go's runtime does at start (so Ollama's server has it)
    and vLLM's set_ulimit does for its API server; returns the (old, new) soft limits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65535)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
        return soft, soft
    return soft, target


class AcceptErrorHandler:
    """An event-loop exception handler: the listener's out-of-descriptors error is one WARNING line (no traceback)
    per ACCEPT_LOG_INTERVAL_S, with how many were folded into it; anything else goes to asyncio's default handler."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._last_logged: float | None = None
        self._num_folded = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        if context.get("message") != ACCEPT_EXHAUSTED:
            loop.default_exception_handler(context)
            return
        now = self._clock()
        if self._last_logged is not None and now - self._last_logged < ACCEPT_LOG_INTERVAL_S:
            self._num_folded += 1
            return
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        exc = context.get("exception")
        log.warning("cannot accept new connections: %s (open-file limit %d); they wait in the listen backlog until "
                    "clients close theirs (%d more such errors since the last such line)",
                    getattr(exc, "strerror", None) or exc, soft, self._num_folded)
        self._last_logged = now
        self._num_folded = 0
