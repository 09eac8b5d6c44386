"""Gateway process: the HTTP server under the app: header limits, and requests aiohttp's own parser rejects.

aiohttp answers a request its parser cannot read (request line or header too long, too many headers, a malformed
Content-Length or chunk size, an invalid method) with a plain-text 400 before any handler or middleware runs. Here
the connection protocol answers it in the API's error shape instead (431 for the size limits, as Go's net/http
under Ollama, else 400), by the path of the request line when that much was read. The limits are raised so
that a long Authorization (a JWT) or Cookie header works, as it does behind vLLM (uvicorn/h11: 256 headers).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import sys
from typing import Callable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestPayloadError, _ErrInfo

from gateway.access_log import access_logger_class
from gateway.anthropic_shape import anthropic_error_response, is_anthropic_path
from gateway.errors import ApiError, InternalError, InvalidRequest, RequestHeaderFieldsTooLarge, Timeout
from gateway import request_id_header
from gateway.cors import CORS_KEY, CorsPolicy
from gateway.http_compat import merging_slashes
from gateway.kobold_errors import is_kobold_path, kobold_error_response
from gateway.llama_cpp_shape import is_llama_cpp_path, llama_cpp_error
from gateway.lmstudio_shape import lmstudio_error
from gateway.ollama_errors import ollama_error_response
from gateway.open_files import AcceptErrorHandler
from gateway.web import error_response, json_response

_MAX_HEADER_BYTES = 128 * 1024
_MAX_HEADERS = 256
# aiohttp server options: bodies are decoded by gateway.body (typed 400/413/415), not by aiohttp. The longest
# request line or header field, times the header count, stays within the 32 MiB a body may take anyway.
# The access log line (aiohttp.access, at INFO), as uvicorn's under vLLM or gin's under Ollama, with the request id
# every response carries, so that a client's X-Request-Id (or the id it got back) finds its request in the log.
ACCESS_LOG_FORMAT = '%a "%r" %s %b %Tf s request_id=%{X-Request-Id}o'
SERVER_OPTIONS = {"auto_decompress": False, "max_line_size": _MAX_HEADER_BYTES,
                  "max_field_size": _MAX_HEADER_BYTES, "max_headers": _MAX_HEADERS,
                  "access_log_format": ACCESS_LOG_FORMAT}
# The start of a request line: a method (valid or not) and the path (without its query), looked for in the first
# _HEAD_BYTES of a read (enough to tell the APIs apart; a body chunk is never scanned whole).
# Seconds an idle connection is kept open: one that sent no request yet, or is between two (GatewayConfig
# .keep_alive_timeout_s, read by GatewayRunner from the app).
KEEP_ALIVE_TIMEOUT_KEY = web.AppKey("keep_alive_timeout_s", float)
DEFAULT_KEEP_ALIVE_TIMEOUT_S = 75.0
_REQUEST_LINE = re.compile(rb"[^\s/]{1,32} (/[^\s?#]*)")
_HEAD_BYTES = 256
log = logging.getLogger("sparkinfer.gateway")


LMSTUDIO_PREFIXES = ("/api/v0/", "/api/v1/")


def is_ollama_path(path: str) -> bool:
    """/api/* is Ollama's API (errors {"error": "..."}); /api/v0/* and /api/v1/* are LM Studio's (OpenAI's error
    object)."""
    return path.startswith("/api/") and not path.startswith(LMSTUDIO_PREFIXES)


def api_error_response(path: str, error: ApiError) -> web.Response:
    """The error in the shape of the API that owns `path`."""
    if is_anthropic_path(path):
        return anthropic_error_response(error)
    if is_llama_cpp_path(path):
        return json_response(llama_cpp_error(error), status=error.status, headers=error.headers)
    if is_kobold_path(path):
        return kobold_error_response(error)
    if path.startswith(LMSTUDIO_PREFIXES):
        return error_response(lmstudio_error(error, native=path.startswith("/api/v1/"), path=path))
    return ollama_error_response(error) if is_ollama_path(path) else error_response(error)


def one_line(message: str) -> str:
    """aiohttp's parser message on one line: it quotes the offending bytes and points at them on a '^' line."""
    return " ".join(line.strip() for line in message.splitlines() if line.strip() not in ("", "^"))


def parse_error(status: int, exc: BaseException | None) -> ApiError:
    """The typed error for what aiohttp's protocol reports: a parser error, or a handler's 500/504."""
    if not isinstance(exc, HttpProcessingError):
        return Timeout("the request timed out") if status == 504 else InternalError("internal error")
    detail = one_line(exc.message)
    if isinstance(exc, LineTooLong):  # its message quotes the line's first bytes as a Python bytes repr: left out
        return RequestHeaderFieldsTooLarge(f"the request line or a header field is longer than the "
                                           f"{_MAX_HEADER_BYTES} bytes this server accepts")
    if detail.startswith("Too many headers"):
        return RequestHeaderFieldsTooLarge(f"the request has more than the {_MAX_HEADERS} header fields this "
                                           f"server accepts")
    return InvalidRequest(f"malformed HTTP request: {detail}", code="invalid_http_request")


class GatewayProtocol(web.RequestHandler):
    """aiohttp's connection protocol, answering its own errors in the API's error shape."""

    __slots__ = ("_target",)

    def __init__(self, manager: web.Server, **kwargs):
        super().__init__(manager, **kwargs)
        # The path of the last request line seen at the start of a read: a parser error has no request.
        self._target = "/"

    def data_received(self, data: bytes) -> None:
        """aiohttp's data_received; also keeps the path of a request line starting this read (for a parser error's
        shape) and fails any body the parser left unfinished."""
        start = _REQUEST_LINE.match(data, 0, _HEAD_BYTES)
        if start is not None:
            self._target = start[1].decode("latin-1")
        super().data_received(data)
        self._fail_unfinished_bodies()

    def _fail_unfinished_bodies(self) -> None:
        """When the parser fails inside a body (a bad chunk size), aiohttp's C parser drops that body's stream
        without an error, so a handler reading it would wait forever: every unfinished body gets the error."""
        if not self._messages or not isinstance(self._messages[-1][0], _ErrInfo):
            return
        error = RequestPayloadError(one_line(self._messages[-1][0].message))
        bodies = [payload for _, payload in self._messages]
        if self._current_request is not None:
            bodies.append(self._current_request.content)
        for body in bodies:
            if not body.is_eof() and body.exception() is None:
                body.set_exception(error)

    def log_exception(self, *args, **kwargs) -> None:
        """A request the parser rejects (its head, or a body it broke off: aiohttp reads what is left of that body
        after the answer and meets the error again) is the client's fault: one WARNING line naming it, as uvicorn
        (vLLM) logs "Invalid HTTP request received.", not aiohttp's ERROR with a traceback for each (a log flood any
        client can cause). Other errors are logged as aiohttp logs them."""
        exc = kwargs.get("exc_info")
        if isinstance(exc, (HttpProcessingError, RequestPayloadError)):
            detail = one_line(exc.message) if isinstance(exc, HttpProcessingError) else str(exc)
            log.warning("malformed HTTP request to %s: %s", self._target, detail)
            return
        super().log_exception(*args, **kwargs)

    async def finish_response(self, request: web.BaseRequest, response: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        """aiohttp's (prepare, write, access log), then the body bytes let go: its connection loop
        (web_protocol.RequestHandler.start) keeps the last response until the keep-alive connection's next request
        or its keep-alive timeout, and with it the whole answer (a 5.8 MB /tokenize answer, for which orjson had
        reserved 265 MB of address space). Only keep_alive is read from it after this."""
        try:
            return await super().finish_response(request, response, start_time)
        finally:
            if isinstance(response, web.Response):
                response.body = None

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """aiohttp's handling (logs it, refuses once a response has begun), answered in the API's error shape."""
        super().handle_error(request, status, exc, message)
        path = self._target if isinstance(exc, HttpProcessingError) else request.path
        response = api_error_response(path, parse_error(status, exc))
        # The app's response hooks (CORS, X-Request-Id) do not run for a request the parser rejected.
        policy = getattr(self._manager, "cors", None) or CorsPolicy()
        response.headers.update(policy.response_headers(request.headers.get("Origin")))
        response.headers[request_id_header.HEADER] = request_id_header.request_id(request)
        response.force_close()
        return response


class _GatewayServer(web.Server):
    def __call__(self) -> GatewayProtocol:
        return GatewayProtocol(self, loop=self._loop, **self._kwargs)


class GatewayRunner(web.AppRunner):
    """web.AppRunner with SERVER_OPTIONS whose connections use GatewayProtocol, idle ones closed after the app's
    keep-alive timeout. Without one, aiohttp's AppRunner keeps an idle connection 3630 s (run_app passes 75 s) and
    one that never sends a request, or only part of its headers, for ever: each holds a socket and a file descriptor
    (nginx's keepalive_timeout and client_header_timeout: 75 s and 60 s)."""

    def __init__(self, app: web.Application, **kwargs):
        keep_alive = app.get(KEEP_ALIVE_TIMEOUT_KEY, DEFAULT_KEEP_ALIVE_TIMEOUT_S)
        super().__init__(app, **{**SERVER_OPTIONS, "keepalive_timeout": keep_alive, **kwargs})

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The app builds a plain web.Server (no hook for its protocol class); the subclass only adds __call__.
        server.__class__ = _GatewayServer
        # For the CORS headers of the errors its protocol answers without the app.
        server.cors = self._app.get(CORS_KEY)
        server.request_factory = merging_slashes(server.request_factory)
        return server


def _end_now(grace_end: asyncio.TimerHandle, on_grace_end: Callable[[bool], None]) -> None:
    if not grace_end.cancelled():
        grace_end.cancel()
        log.info("stopping: second signal, ending the requests in flight now")
        on_grace_end(True)


class ListenError(Exception):
    """The port is taken or the host is no address of this machine: said in one line, without a traceback."""


def _close_once_draining(stop: asyncio.Event):
    """A response hook: a response that starts after the drain began says Connection: close, as uvicorn (vLLM) and
    Go's net/http (Ollama) answer while they shut down: without it a client kept the connection for its next request,
    which the closing server then dropped (a broken pipe, not an answer)."""
    async def hook(request: web.Request, response: web.StreamResponse) -> None:
        if stop.is_set():
            response.force_close()
            # aiohttp chose the Connection header before this hook: say it here.
            response.headers["Connection"] = "close"
    return hook


async def _listen(runner: GatewayRunner, host: str, port: int) -> None:
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port} (SPARKINFER_HOST, SPARKINFER_PORT): "
                          f"{exc.strerror or exc}") from None


def _begin_drain(loop: asyncio.AbstractEventLoop, drain_grace_s: float,
                 on_grace_end: Callable[[bool], None]) -> asyncio.TimerHandle:
    """Starts the grace period; returns its timer."""
    log.info("stopping: draining the requests in flight (up to %.0f s; a second signal ends them now)", drain_grace_s)
    grace_end = loop.call_later(drain_grace_s, on_grace_end, False)
    # A second signal (Ctrl-C again, a second SIGTERM) ends the drain at once, as it stops the scheduler and the
    # worker and as uvicorn's (vLLM's) second Ctrl-C does: what still runs gets the grace-end error now.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, _end_now, grace_end, on_grace_end)
    return grace_end


def serve(app: web.Application, host: str, port: int, on_ready: Callable[[], None], drain_grace_s: float,
          on_grace_end: Callable[[bool], None] = lambda early: None, access_log: bool = True,
          access_log_excluded_paths: frozenset = frozenset()) -> None:
    """Serves `app` on host:port through GatewayRunner until SIGINT or SIGTERM, then drains: the port closes at once
    and the requests in flight get up to drain_grace_s to finish. The signals only set an event: aiohttp's
    handle_signals raises out of the loop, and asyncio.run then cancels every handler at once, cutting each stream.
    When the grace is over, on_grace_end ends what is left with an error each request can still answer (a stream
    its error event, a request not answered yet its status): aiohttp waits up to drain_grace_s more for the handlers
    before it cancels them, which cut a stream mid-body and left a queued request with no response at all."""
    async def run() -> None:
        stop = asyncio.Event()
        app.on_response_prepare.append(_close_once_draining(stop))
        runner = GatewayRunner(app, handle_signals=False, handler_cancellation=True, shutdown_timeout=drain_grace_s,
                               access_log=logging.getLogger("aiohttp.access") if access_log else None,
                               access_log_class=access_logger_class(access_log_excluded_paths))
        await runner.setup()
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(AcceptErrorHandler())
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await _listen(runner, host, port)
            on_ready()
            await stop.wait()
            grace_end = _begin_drain(loop, drain_grace_s, on_grace_end)
        finally:
            await runner.cleanup()
        grace_end.cancel()

    # A Ctrl-C before the handlers are installed (start-up) ends the process without a traceback.
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run())
    except ListenError as exc:
        sys.exit(f"gateway: {exc}")
