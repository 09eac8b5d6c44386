"""Gateway process: request ids: the X-Request-Id response header and the response ids taken from the request.

Every response, streamed or not, error or not, carries X-Request-Id: the client's own X-Request-Id header when it
sent one, else a fresh id. vLLM's request-id middleware (vllm/entrypoints/openai/api_server.py, --enable-request-id-
headers, vllm-project/vllm#9594) answers the same, and OpenAI sends x-request-id on every response, which the
OpenAI SDKs expose as `response._request_id` for tracing a call through proxies and logs.
"""
from __future__ import annotations

import uuid

from aiohttp import web

from gateway.anthropic_shape import REQUEST_ID_HEADER, is_anthropic_request

HEADER = "X-Request-Id"


def header_text(value: str | None) -> str | None:
    """A header as text any answer can carry. aiohttp reads header bytes as UTF-8, keeping bytes that are not as lone
    surrogates, which no JSON body can encode (X-Request-Id: ab\\xffc was a 500 UnicodeEncodeError after the whole
    generation); such a header is read as Latin-1, one character a byte, as Starlette (vLLM) reads every header."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("latin-1")


def response_id(request: web.Request, body, prefix: str, fallback: str) -> str:
    """vLLM's response id: the prefix and the client's X-Request-Id header, else the body's request_id ("returned in
    the response", vLLM's protocol says), so a caller can match answers and logs to its requests; else SGLang's rid,
    which SGLang answers with as the id itself (its meta_info id; a batch's list of rids names nothing here); else
    our own id."""
    given = header_text(request.headers.get(HEADER)) or (
        body.get("request_id") if isinstance(body, dict) else None)
    if isinstance(given, str) and given:
        return f"{prefix}-{given}"
    rid = body.get("rid") if isinstance(body, dict) else None
    return rid if isinstance(rid, str) and rid else fallback


def request_id(request: web.BaseRequest) -> str:
    """The client's X-Request-Id (Latin-1 when its bytes are not UTF-8, as the response id reads it), else a new
    one (uuid4 hex, as vLLM's middleware makes it)."""
    return header_text(request.headers.get(HEADER)) or uuid.uuid4().hex


async def add_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare hook: the header goes out with the response's own headers, a stream's too. Anthropic's
    routes also answer with its request-id header (an error already carries its body's request_id there)."""
    response.headers.setdefault(HEADER, request_id(request))
    if is_anthropic_request(request):
        response.headers.setdefault(REQUEST_ID_HEADER, f"req_{response.headers[HEADER]}")


def install(app: web.Application) -> None:
    """Adds the X-Request-Id response header hook (add_request_id) to the app."""
    app.on_response_prepare.append(add_request_id)
