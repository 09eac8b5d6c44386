"""Gateway process: the access log (aiohttp.access, one line per request), less the paths an operator leaves out."""
from __future__ import annotations

from typing import NamedTuple, Optional

from aiohttp import web
from aiohttp.web_log import AccessLogger

# nginx's "client closed request": the status a request its client left before any answer is logged under.
CLIENT_CLOSED = 499


def access_logger_class(excluded_paths: frozenset) -> type:
    """aiohttp's AccessLogger that logs no request to one of `excluded_paths` (the path without its query, as vLLM's
    --disable-access-log-for-endpoints compares it): the probes and scrapes that hit /health or /metrics every few
    seconds buried every other line (vllm-project/vllm#29023)."""

    class FilteredAccessLogger(AccessLogger):
        def log(self, request, response, time: float) -> None:
            if request.path not in excluded_paths:
                super().log(request, response, time)

    return FilteredAccessLogger


class _LeftStream(NamedTuple):
    """What the access log's format reads of a response (%s, %b, %{X-Request-Id}o), for a stream its client left."""
    status: int
    body_length: int
    headers: object


def parse_paths(value: str) -> frozenset:
    """A comma-separated list of paths ("/health,/metrics"), spaces and empty entries ignored."""
    return frozenset(path.strip() for path in value.split(",") if path.strip())


def log_departure(request: web.BaseRequest, response: Optional[web.StreamResponse], elapsed_s: float,
                  request_id: str) -> None:
    """The access-log line of a request its client left (aiohttp logs none for a cancelled handler): under the stream
    it had started (its status, the bytes sent), else 499 with the request's id, so a log reader sees every request
    the metrics count. The bytes are the connection's writer's count, headers included, as %b logs a finished
    answer's: aiohttp sets a response's body_length only once it ends, so a stream left midway was logged as 0."""
    access_logger = getattr(request.protocol, "access_logger", None)
    if access_logger is None or not access_logger.enabled:
        return
    if response is None:
        response = web.Response(status=CLIENT_CLOSED, headers={"X-Request-Id": request_id})
    elif request.writer is not None:
        response = _LeftStream(response.status, request.writer.output_size, response.headers)
    access_logger.log(request, response, elapsed_s)
