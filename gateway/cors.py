"""Gateway process: CORS, the origins a browser page may call the gateway from (SPARKINFER_ALLOWED_ORIGINS).

By default any origin, without credentials, as vLLM serves it (--allowed-origins '["*"]', --allow-credentials off:
Starlette's CORSMiddleware, vllm/entrypoints/openai/api_server.py): an OPTIONS preflight on a route gets 200 (204 on
Ollama's routes, as gin-contrib/cors answers there) with the Access-Control-Allow-* headers, whatever the API key
(browsers send no Authorization on a preflight), and every response, streamed ones and errors included, carries
Access-Control-Allow-Origin: *. A list of origins (vLLM's JSON list, or Ollama's OLLAMA_ORIGINS: comma-separated,
`*` inside one matching any run of characters, `chrome-extension://*`, `http://localhost:*`) lets only those in:
an allowed Origin is echoed back with Vary: Origin, and a request or preflight from any other gets 403, as Ollama
answers it (gin-contrib/cors aborts with 403), so a page the operator did not list cannot drive the server with a
"simple" text/plain POST either. With credentials allowed (vLLM's --allow-credentials) the Origin is echoed with
Access-Control-Allow-Credentials: true, since browsers refuse `*` with credentials. A preflight that asks for
Chrome's Private Network Access (Access-Control-Request-Private-Network: true, a public page calling a local
server) is allowed for an origin the list names, never for `*` (the attack the check exists to stop).
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Callable

from aiohttp import web

from gateway.errors import ApiError, Forbidden

ALLOW_METHODS = "GET, POST, DELETE, HEAD, OPTIONS"
_DEFAULT_ALLOW_HEADERS = "Authorization, Content-Type, Content-Encoding, Accept, X-Requested-With"
_MAX_AGE_S = "600"
# On every response a page may read: the Retry-After of a 429/503, its X-Request-Id and, on the Anthropic routes,
# Anthropic's request-id (the Anthropic SDK in a browser, dangerouslyAllowBrowser, reads it as _request_id), and the
# x-should-retry: false of a 501 that retrying cannot help (the OpenAI and Anthropic SDKs' shouldRetry read it first;
# hidden from a page, they retried such a 5xx twice).
EXPOSE_HEADERS = "Retry-After, X-Request-Id, request-id, x-should-retry"
CORS_RESPONSE_HEADERS = {"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": EXPOSE_HEADERS}
ANY_ORIGIN = ("*",)


def parse_origins(text: str) -> tuple[str, ...]:
    """The origins of --allowed-origins: vLLM's JSON list ('["https://a.example"]') or a comma-separated list, as
    OLLAMA_ORIGINS is written. ValueError for JSON that is not a list of strings."""
    text = text.strip()
    if text.startswith("["):
        origins = json.loads(text)
        if not isinstance(origins, list) or not all(isinstance(origin, str) for origin in origins):
            raise ValueError("a JSON list of origin strings is expected")
        return tuple(origin.strip() for origin in origins if origin.strip())
    return tuple(origin.strip() for origin in text.split(",") if origin.strip())


@functools.lru_cache(maxsize=256)
def _pattern(origin: str) -> re.Pattern:
    """An allowed-origins entry as a regex, built once per entry (listed() runs on every request with an Origin)."""
    return re.compile(".*".join(re.escape(part) for part in origin.split("*")))


@dataclass(frozen=True)
class CorsPolicy:
    """The origins allowed (ANY_ORIGIN: every one) and whether credentials are."""
    origins: tuple[str, ...] = ANY_ORIGIN
    allow_credentials: bool = False

    @property
    def any_origin(self) -> bool:
        return "*" in self.origins

    def listed(self, origin: str) -> bool:
        """Whether a pattern other than a bare `*` matches origin (a `*` inside one matches any characters)."""
        return any(_pattern(pattern).fullmatch(origin) for pattern in self.origins if pattern != "*")

    def allows(self, origin: str | None) -> bool:
        """Whether a request with this Origin header (None: not a browser's cross-origin call) is served."""
        return origin is None or self.any_origin or self.listed(origin)

    def response_headers(self, origin: str | None) -> dict:
        """The CORS headers of a response to a request with this Origin (none for an origin not allowed)."""
        if self.any_origin and not self.allow_credentials:
            return dict(CORS_RESPONSE_HEADERS)
        if origin is None or not self.allows(origin):
            # Shared caches must not hand one origin's answer to another.
            return {"Vary": "Origin"}
        headers = {"Access-Control-Allow-Origin": origin, "Access-Control-Expose-Headers": EXPOSE_HEADERS,
                   "Vary": "Origin"}
        if self.allow_credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        return headers

    def preflight_headers(self, request: web.BaseRequest) -> dict:
        """The headers of an allowed preflight's answer: the methods, the headers it asked for, and PNA's opt-in for
        an origin the list names."""
        origin = request.headers.get("Origin")
        asked = request.headers.get("Access-Control-Request-Headers")
        headers = {**self.response_headers(origin), "Access-Control-Allow-Methods": ALLOW_METHODS,
                   "Access-Control-Allow-Headers": asked or _DEFAULT_ALLOW_HEADERS,
                   "Access-Control-Max-Age": _MAX_AGE_S, "Allow": ALLOW_METHODS}
        private = request.headers.get("Access-Control-Request-Private-Network", "").lower() == "true"
        if private and origin is not None and self.listed(origin):
            headers["Access-Control-Allow-Private-Network"] = "true"
        return headers

    def refusal(self, origin: str) -> ApiError:
        return Forbidden(f"origin {origin!r} is not allowed to call this server: add it to SPARKINFER_ALLOWED_ORIGINS "
                         f"(--allowed-origins)", code="origin_not_allowed")


CORS_KEY = web.AppKey("cors_policy", CorsPolicy)


def _policy(request: web.Request) -> CorsPolicy:
    return request.app.get(CORS_KEY) or CorsPolicy()


def preflight_middleware(respond: Callable[[str, ApiError], web.Response]):
    """Answers OPTIONS on any existing route with 200 (204 on Ollama's routes) and the CORS headers, or, for an
    origin the policy refuses, the 403 in the route's error shape (respond(path, error))."""
    @web.middleware
    async def preflight(request: web.Request, handler):
        if request.method != "OPTIONS":
            return await handler(request)
        error = request.match_info.http_exception
        if error is not None and error.status == 404:
            return await handler(request)
        policy, origin = _policy(request), request.headers.get("Origin")
        if not policy.allows(origin):
            return respond(request.path, policy.refusal(origin))
        # As the engines answer it: vLLM (Starlette) 200 "OK", Ollama (gin-contrib/cors) 204 on its own /api routes.
        headers = policy.preflight_headers(request)
        if request.path.startswith("/api/") and not request.path.startswith(("/api/v0/", "/api/v1/")):
            return web.Response(status=204, headers=headers)
        return web.Response(status=200, text="OK", headers=headers)
    return preflight


def check_origin(request: web.Request) -> None:
    """Raises the 403 of a request from an origin the policy refuses (also before an Expect: 100-continue body)."""
    origin = request.headers.get("Origin")
    policy = _policy(request)
    if not policy.allows(origin):
        raise policy.refusal(origin)


@web.middleware
async def origin_middleware(request: web.Request, handler):
    """A request from an origin the policy refuses gets its 403 (raised for the error middleware to shape), before
    its key is checked or its body read."""
    check_origin(request)
    return await handler(request)


async def add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare hook: every response (also a stream, whose headers leave before the handler returns) says
    which origin may read it."""
    for name, value in _policy(request).response_headers(request.headers.get("Origin")).items():
        vary = response.headers.get("Vary")
        if name == "Vary" and vary:
            if value.lower() not in (token.strip().lower() for token in vary.split(",")):
                response.headers["Vary"] = f"{vary}, {value}"
            continue
        response.headers.setdefault(name, value)
