"""Gateway process: request bodies off the wire, with Content-Encoding (identity, gzip, deflate) decoded here.

The server runs with aiohttp's auto_decompress off (see http_server.SERVER_OPTIONS): aiohttp's own decoder turns a
corrupt gzip body into a 500 and an unknown encoding into a plain-text 400 before any handler runs. Here a
corrupt or truncated body is a typed 400, an encoding we cannot decode a 415, and the decoded size is held
to the same limit as the wire size (a zip bomb is a 413). The whole body must arrive within the body timeout, or keep
coming at MIN_BODY_RATE (408 past it), so that a body shorter than its Content-Length, or one sent a byte a second,
holds no handler for ever.
"""
from __future__ import annotations

import asyncio
import zlib

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_exceptions import HTTPRequestEntityTooLarge
from aiohttp.web_protocol import RequestPayloadError

from gateway.errors import InvalidRequest, PayloadTooLarge, RequestTimeout, UnsupportedMediaType
from gateway.offload import run_cpu

# zlib wbits per Content-Encoding: gzip framing, zlib framing (47 = auto-detect zlib or gzip header).
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": 47}
_IDENTITY = ("", "identity")
# The request key read_body keeps the decoded body under while the handler runs.
_BODY_KEY = web.RequestKey("body", bytes)
# A parsed body handed from one handler to the next (hand_on).
_HANDED_ON_KEY = web.RequestKey("handed_on_body", object)
# Seconds a request's whole body may take to arrive once its head is read (GatewayConfig.body_timeout_s).
BODY_TIMEOUT_KEY = web.AppKey("body_timeout_s", float)
DEFAULT_BODY_TIMEOUT_S = 60.0
# Bytes a second a body must average to be given more than the body timeout (a byte-a-second trickle is not).
MIN_BODY_RATE = 16 * 1024


def _encodings(request: web.Request) -> list[str]:
    header = request.headers.get("Content-Encoding", "")
    return [part.strip().lower() for part in header.split(",") if part.strip().lower() not in _IDENTITY]


def _inflate(raw: bytes, encoding: str, limit: int, wbits: int = 0) -> bytes:
    decoder = zlib.decompressobj(wbits or _WBITS[encoding])
    try:
        out = decoder.decompress(raw, limit + 1)
        if len(out) <= limit:
            out += decoder.flush()
    except zlib.error as exc:
        if encoding == "deflate" and not wbits:
            # Some clients send "deflate" as a raw DEFLATE stream without the zlib header (aiohttp accepts it).
            return _inflate(raw, encoding, limit, -zlib.MAX_WBITS)
        raise InvalidRequest(f"the request body is not valid {encoding} data ({exc})",
                             code="invalid_encoding") from exc
    if len(out) > limit:
        raise PayloadTooLarge(f"the request body is larger than {limit} bytes once decoded ({encoding})")
    if not decoder.eof or decoder.unused_data:
        raise InvalidRequest(f"the request body is not a complete {encoding} stream (truncated, or bytes after "
                             f"its end)", code="invalid_encoding")
    return out


async def _read_raw(request: web.Request) -> bytes:
    """The body as sent, up to the server's client_max_size (413 past it, as request.read() answers), within the body
    timeout (408 past it, with the connection closed: the rest of that body may still come). A large body on a slow
    link (a 10 MB prompt of images at 1 Mbit/s takes 80 s) is given more time while it keeps coming at MIN_BODY_RATE
    on average, with no gap as long as the timeout (nginx's client_body_timeout, 60 s between two reads): vLLM
    (uvicorn) and Ollama (Go's http.Server without a ReadTimeout) set no limit at all, where the timeout alone cut it.

    Not request.read(): it keeps the bytes on the request, and aiohttp's connection loop
    (web_protocol.RequestHandler.start) keeps the last request until the keep-alive connection's next one arrives or
    it times out, so every idle keep-alive client (OpenAI's and Ollama's clients pool their connections) pinned its
    last body, up to 32 MiB each. aiohttp sets no limit on the time a body takes; the timeout counts the whole body,
    as Go's http.Server ReadTimeout does, unless it keeps coming at MIN_BODY_RATE (nginx's client_body_timeout alone
    restarts on every read, which a client sending a byte a second never trips).
    """
    declared = request.content_length
    if declared is not None and declared > request.client_max_size:
        # Refused on its Content-Length, as nginx's client_max_body_size and our Expect: 100-continue answer it:
        # read first, up to 32 MiB were buffered for a 413, and a body that never came got a 408 instead.
        raise PayloadTooLarge(f"request body too large: its Content-Length ({declared} bytes) is more than the "
                              f"{request.client_max_size} bytes this server accepts", headers={"Connection": "close"})
    # As request.read() does: the reader takes the whole body in large reads, not 64 KiB pause/resume cycles.
    request.content.set_read_chunk_size(request.client_max_size)
    loop = asyncio.get_running_loop()
    timeout = request.app.get(BODY_TIMEOUT_KEY, DEFAULT_BODY_TIMEOUT_S)
    started = loop.time()
    chunks, size = [], 0
    while True:
        # A body still coming at MIN_BODY_RATE on average gets the time it needs, with no silence of `timeout`.
        deadline = started + max(timeout, size / MIN_BODY_RATE)
        try:
            wait = min(max(0.0, deadline - loop.time()), timeout)
            chunk = await asyncio.wait_for(request.content.readany(), wait)
        except asyncio.TimeoutError:
            expected = f" of the {request.content_length}" if request.content_length is not None else ""
            raise RequestTimeout(f"the request body did not arrive within {timeout:g} s (SPARKINFER_BODY_TIMEOUT_S): "
                                 f"{size}{expected} bytes came", headers={"Connection": "close"}) from None
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > request.client_max_size:
            raise HTTPRequestEntityTooLarge(max_size=request.client_max_size, actual_size=size)
        chunks.append(chunk)


def forget_body(request: web.Request) -> None:
    """Drops the body read_body kept for the request's handler, and a parsed one handed on (app.error_middleware,
    once the handler is done)."""
    request.pop(_BODY_KEY, None)
    request.pop(_HANDED_ON_KEY, None)


def hand_on(request: web.Request, parsed) -> None:
    """Keeps the parsed body for the handler the request is handed to (SageMaker's /invocations reads it to choose
    chat or completions), whose read_json takes it (take_handed_on) instead of parsing the bytes again."""
    request[_HANDED_ON_KEY] = parsed


def take_handed_on(request: web.Request):
    """The body hand_on kept, once (None if none): the handler taking it may change it."""
    return request.pop(_HANDED_ON_KEY, None)


async def read_body(request: web.Request, limit: int) -> bytes:
    """The decoded body bytes; 400 corrupt/truncated, 413 too large, 415 unknown Content-Encoding. Kept on the request
    until forget_body: a route that hands the request to another handler (LM Studio's echo-only completion,
    SageMaker's /invocations) reads it twice, and request.content gives it only once."""
    if _BODY_KEY in request:
        return request[_BODY_KEY]
    request[_BODY_KEY] = raw = await _read_decoded(request, limit)
    return raw


async def _read_decoded(request: web.Request, limit: int) -> bytes:
    encodings = _encodings(request)
    for encoding in encodings:
        if encoding not in _WBITS:
            raise UnsupportedMediaType(f"Content-Encoding '{encoding}' is not supported; send the body as "
                                       f"identity, gzip or deflate", param="Content-Encoding")
    try:
        raw = await _read_raw(request)
    except HTTPRequestEntityTooLarge as exc:
        raise PayloadTooLarge(f"request body too large: {exc.text}") from exc
    except (RequestPayloadError, HttpProcessingError) as exc:
        # The body's framing is broken (a bad chunk size; http_server hands the parser's error to the body), so
        # the connection cannot carry another request.
        raise InvalidRequest(f"malformed HTTP request body: {exc}", code="invalid_http_request",
                             headers={"Connection": "close"}) from exc
    # Content-Encoding lists codings in the order applied: undo them last first.
    for encoding in reversed(encodings):
        raw = await run_cpu(_inflate, raw, encoding, limit)
    return raw
