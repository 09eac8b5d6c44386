"""Gateway process: the thread pool that runs per-request CPU work (templates, tokenizer, grammars) off the event loop.

Rendering, tokenizing, schema and grammar checks of one request can take seconds on a big prompt; on the
loop they would freeze every other stream and /health. The tokenizer and zlib release the GIL, so these
threads really run beside the loop; pure-Python work (Jinja) is interleaved by the GIL switch interval.
"""
from __future__ import annotations

import asyncio
import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional, TypeVar

T = TypeVar("T")
_EXECUTOR: Optional[ThreadPoolExecutor] = None


def num_workers() -> int:
    """SPARKINFER_GATEWAY_CPU_THREADS, else the CPU count capped at 4 (at least 2: one big prompt never blocks all)."""
    configured = os.environ.get("SPARKINFER_GATEWAY_CPU_THREADS")
    if configured:
        return max(1, int(configured))
    return max(2, min(4, os.cpu_count() or 1))


def executor() -> ThreadPoolExecutor:
    """The gateway's one thread pool for CPU work off the event loop (num_workers() threads, gateway-cpu-*), made on
    first use."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = ThreadPoolExecutor(max_workers=num_workers(), thread_name_prefix="gateway-cpu")
    return _EXECUTOR


async def run_cpu(fn: Callable[..., T], *args, **kwargs) -> T:
    """fn(*args, **kwargs) on the gateway's CPU pool; its exceptions (typed ApiErrors included) re-raise here."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor(), functools.partial(fn, *args, **kwargs))
