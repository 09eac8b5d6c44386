"""Gateway process: HTTP details clients rely on: CORS, trailing slashes, Expect: 100-continue.

CORS as vLLM serves it by default (any origin, no credentials): an OPTIONS preflight on a route gets 200 (204 on
Ollama's routes) with the Access-Control-Allow-* headers, whatever the API key (browsers send no Authorization on
a preflight), and every response, streamed ones included, carries Access-Control-Allow-Origin. A path with one
trailing slash (`/v1/chat/completions/`, as some SDKs build it from a base URL ending in '/') is served by the
same handler instead of a 404, which clients that do not follow redirects would get from a redirect too. A
request that sends `Expect: 100-continue` without a valid API key, or with a Content-Length over the body limit,
gets its 401 or 413 at once, before the client sends the body (aiohttp's default would invite the whole body
first); an Expect other than 100-continue is a 417; each in the route's API error shape.
"""
from __future__ import annotations

from typing import Awaitable, Callable

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11

from gateway.errors import ApiError, PayloadTooLarge


class ExpectationFailed(ApiError):
    """417: an Expect header other than 100-continue."""
    status = 417
    type = "invalid_request_error"
    code = "expectation_failed"


_ALLOW_METHODS = "GET, POST, DELETE, HEAD, OPTIONS"
_DEFAULT_ALLOW_HEADERS = "Authorization, Content-Type, Content-Encoding, Accept, X-Requested-With"
_MAX_AGE_S = "600"
# On every response: any origin may read it, the Retry-After of a 429/503, its X-Request-Id and, on the Anthropic
# routes, Anthropic's request-id (the Anthropic SDK in a browser, dangerouslyAllowBrowser, reads it as _request_id).
CORS_RESPONSE_HEADERS = {"Access-Control-Allow-Origin": "*",
                         "Access-Control-Expose-Headers": "Retry-After, X-Request-Id, request-id"}


def _preflight_headers(request: web.Request) -> dict:
    asked = request.headers.get("Access-Control-Request-Headers")
    return {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": _ALLOW_METHODS,
            "Access-Control-Allow-Headers": asked or _DEFAULT_ALLOW_HEADERS, "Access-Control-Max-Age": _MAX_AGE_S,
            "Allow": _ALLOW_METHODS}


@web.middleware
async def cors_middleware(request: web.Request, handler):
    """Answers OPTIONS on any existing route with 200 (204 on Ollama's routes) and the CORS headers."""
    if request.method != "OPTIONS":
        return await handler(request)
    error = request.match_info.http_exception
    if error is not None and error.status == 404:
        return await handler(request)
    # As the engines answer it: vLLM (Starlette) 200 "OK", Ollama (gin-contrib/cors) 204 on its own /api routes.
    ollama = request.path.startswith("/api/") and not request.path.startswith(("/api/v0/", "/api/v1/"))
    if ollama:
        return web.Response(status=204, headers=_preflight_headers(request))
    return web.Response(status=200, text="OK", headers=_preflight_headers(request))


async def add_cors_origin(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare hook: every response (also a stream, whose headers leave before the handler returns)
    says any origin may read it."""
    for name, value in CORS_RESPONSE_HEADERS.items():
        response.headers.setdefault(name, value)


def add_head_routes(app: web.Application) -> None:
    """Registers HEAD beside every GET route that lacks it (same resource and handler), as add_get does: a route
    added with add_route("GET", ...) answered HEAD with a 405, where RFC 9110 9.3.2 makes HEAD the GET without its
    content (aiohttp leaves the body out of a HEAD answer)."""
    for route in list(app.router.routes()):
        resource = route.resource
        if route.method != "GET" or resource is None:
            continue
        if not any(other.method == "HEAD" for other in resource):
            resource.add_route("HEAD", route.handler)


def add_trailing_slash_routes(app: web.Application) -> None:
    """Registers `path/` beside every route `path` (same method and handler); call after all routes."""
    for route in list(app.router.routes()):
        resource = route.resource
        if resource is None or route.method == "HEAD":
            continue
        path = resource.canonical
        if path == "/" or path.endswith("/"):
            continue
        # add_get also registers HEAD for the slashed path, as for the original.
        if route.method == "GET":
            app.router.add_get(path + "/", route.handler)
        else:
            app.router.add_route(route.method, path + "/", route.handler)


def expect_handler(limit: int, respond: Callable[[str, ApiError], web.Response],
                   authorize: Callable[[web.Request], None]):
    """An aiohttp expect handler: 401 (authorize raised) or 413 (a declared body over `limit` bytes) at once, before
    the client sends the body, 417 for an unknown expectation (each as respond(path, error) shapes it), else
    "100 Continue"."""
    async def handle(request: web.Request) -> web.Response | None:
        if request.version != HttpVersion11:
            return None
        expect = request.headers.get(hdrs.EXPECT, "")
        if expect.lower() != "100-continue":
            return respond(request.path, ExpectationFailed(f"unsupported Expect header {expect!r}: only "
                                                           f"100-continue is understood", param="Expect"))
        try:
            authorize(request)
        except ApiError as exc:
            exc.headers.setdefault("Connection", "close")
            return respond(request.path, exc)
        declared = request.content_length
        if declared is not None and declared > limit:
            error = PayloadTooLarge(f"the request body ({declared} bytes) is larger than the {limit} bytes this "
                                    f"server accepts", headers={"Connection": "close"})
            return respond(request.path, error)
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0
        return None
    return handle


def use_expect_handler(router: web.UrlDispatcher, handler: Callable[[web.Request], Awaitable]) -> None:
    """Makes `handler` the expect handler of every route added to router from now on (add_post and the others
    go through add_route; add_get does not)."""
    add_route, add_get = router.add_route, router.add_get

    def add(method: str, path: str, route_handler, **kwargs):
        kwargs.setdefault("expect_handler", handler)
        return add_route(method, path, route_handler, **kwargs)

    def get(path: str, route_handler, **kwargs):
        kwargs.setdefault("expect_handler", handler)
        return add_get(path, route_handler, **kwargs)
    router.add_route, router.add_get = add, get


def install(app: web.Application) -> None:
    """Adds the CORS response hook, HEAD beside GET and the trailing-slash routes (the middleware goes in the app's
    list)."""
    app.on_response_prepare.append(add_cors_origin)
    add_head_routes(app)
    add_trailing_slash_routes(app)
