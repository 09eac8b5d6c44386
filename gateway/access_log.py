"""Gateway process: the access log (aiohttp.access, one line per request), less the paths an operator leaves out."""
from __future__ import annotations

from aiohttp.web_log import AccessLogger


def access_logger_class(excluded_paths: frozenset) -> type:
    """aiohttp's AccessLogger that logs no request to one of `excluded_paths` (the path without its query, as vLLM's
    --disable-access-log-for-endpoints compares it): the probes and scrapes that hit /health or /metrics every few
    seconds buried every other line (vllm-project/vllm#29023)."""

    class FilteredAccessLogger(AccessLogger):
        def log(self, request, response, time: float) -> None:
            if request.path not in excluded_paths:
                super().log(request, response, time)

    return FilteredAccessLogger


def parse_paths(value: str) -> frozenset:
    """A comma-separated list of paths ("/health,/metrics"), spaces and empty entries ignored."""
    return frozenset(path.strip() for path in value.split(",") if path.strip())
