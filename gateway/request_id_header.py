"""Gateway process: the X-Request-Id response header.

Every response, streamed or not, error or not, carries X-Request-Id: the client's own X-Request-Id header when it
sent one, else a fresh id. vLLM's request-id middleware (vllm/entrypoints/openai/api_server.py, --enable-request-id-
headers, vllm-project/vllm#9594) answers the same, and OpenAI sends x-request-id on every response, which the
OpenAI SDKs expose as `response._request_id` for tracing a call through proxies and logs.
"""
from __future__ import annotations

import uuid

from aiohttp import web

from gateway.anthropic_shape import REQUEST_ID_HEADER, is_anthropic_request
from gateway.openai_routes import header_text

HEADER = "X-Request-Id"


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
    app.on_response_prepare.append(add_request_id)
