"""Gateway process: Ollama's error shape ({"error": "..."}, its words for a full queue, a prompt past the window and an
empty body) and its JSON answers' Content-Type, for the /api routes and aiohttp's own errors on them."""
from __future__ import annotations

import functools
import logging

from aiohttp import web

from gateway import metrics
from gateway.errors import ApiError, ContextLengthExceeded, Overloaded
from gateway.web import EMPTY_BODY
from gateway.web import json_response as _json_response

log = logging.getLogger("sparkinfer.gateway")

# Ollama's JSON answers and errors are gin's c.JSON: "application/json; charset=utf-8", the Content-Type its route
# tests assert (server/routes_test.go TestRoutes on /api/version, /api/tags, /api/show).
json_response = functools.partial(_json_response, charset="utf-8")

_BUSY = "server busy, please try again.  maximum pending requests exceeded"
# Ollama's refusal of a prompt past the window (its runner's errorInputTooLong, the 400 of truncate false), which
# clients match to shorten and retry; the counts follow it.
_INPUT_TOO_LONG = "the input length exceeds the context length"

def ollama_error_response(exc: ApiError) -> web.Response:
    """Ollama's error shape {"error": "..."}; a full queue is Ollama's 503 in its words alone (handleScheduleError
    writes ErrMaxQueue's text, server/sched.go: clients match it), the scheduler's reason only logged; an empty body
    its 400 'missing request body' (every handler's answer to the io.EOF of binding nothing, server/routes.go); a prompt
    past the window opens with Ollama's words for it, _INPUT_TOO_LONG."""
    status, message = exc.status, exc.message
    if isinstance(exc, Overloaded):
        log.info("Ollama request refused with 503 server busy: %s", exc.message)
        status, message = 503, _BUSY
    elif isinstance(exc, ContextLengthExceeded):
        message = f"{_INPUT_TOO_LONG}: {message}"
    elif message == EMPTY_BODY:
        message = "missing request body"
    return json_response({"error": message}, status=status, headers=exc.headers)


def ollama_error(exc: ApiError) -> web.Response:
    """ollama_error_response, counted as a rejected request."""
    metrics.REJECTED.labels(reason=exc.code or exc.type).inc()
    return ollama_error_response(exc)


def ollama_errors(handler):
    """Maps every typed error (and aiohttp's own 4xx) raised by handler to Ollama's error shape."""
    @functools.wraps(handler)
    async def wrapped(self, request: web.Request, **kwargs) -> web.StreamResponse:
        try:
            return await handler(self, request, **kwargs)
        except ApiError as exc:
            return ollama_error(exc)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return json_response({"error": exc.text or exc.reason}, status=exc.status)
    return wrapped
