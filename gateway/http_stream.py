"""Gateway process: the streaming HTTP loop every API shares (admission before headers, keep-alive, disconnect)."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Optional, Protocol

from aiohttp import web
from aiohttp.http import HttpVersion11

from gateway.engine import Delta, Generation, Usage
from gateway.errors import ApiError, InternalError
from gateway.generation import NOT_READY

log = logging.getLogger("sparkinfer.gateway")
_NO_EVENT = NOT_READY
_MIN_WAIT_S = 0.001
# A streamed response once its headers are out: a client that leaves later has had that answer (its status counts
# the departure, and the access-log line is written under it).
STREAM_RESPONSE_KEY = web.RequestKey("stream_response", web.StreamResponse)


class Framer(Protocol):
    """Turns engine events into one API's wire frames (SSE for OpenAI, NDJSON for Ollama)."""
    content_type: str
    headers: dict

    def start(self, usage: Usage) -> list[bytes]:
        """The frames sent right after the headers, before any Delta (usage: the prompt counted so far)."""

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """The frames of one engine Delta (none where it adds nothing the API shows); usage as of the text sent."""

    def end(self, usage: Usage) -> list[bytes]:
        """The frames after every choice finished: final usage and the API's end marker."""

    def error(self, error: ApiError, usage: Usage) -> list[bytes]:
        """The frames of a failure after the headers went out (the status is already 200): the API's error event."""

    def keepalive(self) -> Optional[bytes]:
        """What a silent stream sends every SPARKINFER_SSE_KEEPALIVE_SECONDS; None sends nothing."""


async def _first_event(gen: Generation, wait_s: float):
    """The first Delta, waited for up to wait_s so that a fast refusal (429, 503, 400) keeps its status."""
    try:
        return await gen.next(timeout=wait_s)
    except asyncio.TimeoutError:
        return _NO_EVENT


async def open_stream(request: web.Request, content_type: str, headers: dict) -> web.StreamResponse:
    """A prepared 200 streaming response. HTTP/1.1 frames it in chunks; HTTP/1.0 has no framing for a body of unknown
    length but the end of the connection, so that connection is closed after it even when the client asked to keep
    it (aiohttp kept it open: a `Connection: keep-alive` HTTP/1.0 client, such as `ab -k`, waited forever)."""
    response = web.StreamResponse(status=200, headers={"Content-Type": content_type, **headers})
    if request.version < HttpVersion11:
        response.force_close()
    await response.prepare(request)
    request[STREAM_RESPONSE_KEY] = response
    return response


async def _write_all(response: web.StreamResponse, frames: list[bytes]) -> None:
    """Each frame (one SSE event, one NDJSON line) in a write of its own, so one HTTP chunk a frame, as vLLM
    (Starlette), llama-server and Ollama send them: clients that read one event a chunk (requests' iter_content with
    no chunk size, a fetch reader) took two events glued in one chunk for one broken JSON."""
    for frame in frames:
        await response.write(frame)


async def stream_generation(request: web.Request, gen: Generation, framer: Framer,
                            keepalive_s: float, pings: bool = True) -> web.StreamResponse:
    """Streams gen to the client; cancels it when the client goes away or anything fails. pings false: no keep-alive
    on a silent stream (llama.cpp's sse_ping_interval -1)."""
    try:
        started = time.monotonic()
        # Before any header: every choice admitted (or the refusal of one, as the whole request's status).
        await gen.wait_started(keepalive_s)
        first = await _first_event(gen, max(keepalive_s - (time.monotonic() - started), 0.01))
        response = await open_stream(request, framer.content_type, framer.headers)
        # The opening frames come before any text: nothing generated is counted in them yet.
        sent = gen.sent_usage()
        try:
            await _write_all(response, framer.start(Usage(sent.prompt_tokens, 0, sent.cached_tokens, sent.per_prompt)))
            await _pump(response, gen, framer, first, keepalive_s, pings)
        except ApiError as exc:
            # Headers are gone already: the error travels in the stream's own framing.
            await _write_all(response, framer.error(exc, gen.usage()))
        except ConnectionResetError:
            raise                               # the client left: app.error_middleware takes it as a cancel
        except Exception as exc:  # noqa: BLE001 - a server bug once the headers are out
            # So does a server bug's 500: the error middleware's answer written into the open stream was a second
            # HTTP response inside the chunked body (clients: "illegal chunk header"), and the stream never ended.
            log.exception("unhandled error in the stream of %s %s", request.method, request.path)
            await _write_all(response, framer.error(InternalError(f"internal error: {exc!r}"), gen.usage()))
        await response.write_eof()
        return response
    finally:
        await gen.close()


async def _pump(response: web.StreamResponse, gen: Generation, framer: Framer, first, keepalive_s: float,
                pings: bool = True) -> None:
    """Writes gen's frames as they come, and a keep-alive whenever nothing was written for keepalive_s: silence on the
    wire, not between Deltas, since Deltas may give no frame for long (a tool call is held back until it is whole: a
    long file written as a call's argument sent nothing for minutes, and proxies and client idle timeouts cut it).
    A Delta already queued is taken without a wait (Generation.next); the keep-alive is an alarm that wakes next(),
    not a timeout on every token's wait; each frame goes out in a chunk of its own (_write_all)."""
    delta, last_write = first, time.monotonic()
    alarm = _Alarm(gen)
    try:
        while True:
            if delta is None:
                await _write_all(response, framer.end(gen.usage()))
                return
            frames = [] if delta is _NO_EVENT else framer.delta(delta, gen.sent_usage())
            if not frames and time.monotonic() - last_write >= keepalive_s:
                frames = [ping for ping in (framer.keepalive(),) if ping and pings]
                last_write = time.monotonic()     # a framer without keep-alives (Ollama's NDJSON) stays silent
            if frames:
                await _write_all(response, frames)
                last_write = time.monotonic()
            alarm.arm(max(keepalive_s - (time.monotonic() - last_write), _MIN_WAIT_S))
            delta = await gen.next()
    finally:
        alarm.cancel()


class _Alarm:
    """Wakes gen's next() once after a delay; armed again only once it rang, so a stream waiting for each of its
    tokens sets one timer a keep-alive period, not one a token (a timeout on every wait cost a timer each: asyncio
    .wait_for a Task too). It may ring early (written since): the pump then finds no silence and arms it again."""

    def __init__(self, gen: Generation):
        self._gen = gen
        self._handle: Optional[asyncio.TimerHandle] = None

    def arm(self, delay_s: float) -> None:
        if self._handle is None:
            self._handle = asyncio.get_running_loop().call_later(delay_s, self._ring)

    def _ring(self) -> None:
        self._handle = None
        self._gen.wake()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
