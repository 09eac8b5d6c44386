"""Gateway process: HTTP details clients rely on: CORS (preflight and headers) and paths with a trailing slash.

CORS as vLLM serves it by default (any origin, no credentials): an OPTIONS preflight on a route gets 204 with the
Access-Control-Allow-* headers, whatever the API key (browsers send no Authorization on a preflight), and every
response, streamed ones included, carries Access-Control-Allow-Origin. A path with one trailing slash
(`/v1/chat/completions/`, as some SDKs build it from a base URL ending in '/') is served by the same handler
instead of a 404, which clients that do not follow redirects would get from a redirect too.
"""
from __future__ import annotations

from aiohttp import web

_ALLOW_METHODS = "GET, POST, DELETE, HEAD, OPTIONS"
_DEFAULT_ALLOW_HEADERS = "Authorization, Content-Type, Content-Encoding, Accept, X-Requested-With"
_MAX_AGE_S = "600"


def _preflight_headers(request: web.Request) -> dict:
    asked = request.headers.get("Access-Control-Request-Headers")
    return {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": _ALLOW_METHODS,
            "Access-Control-Allow-Headers": asked or _DEFAULT_ALLOW_HEADERS, "Access-Control-Max-Age": _MAX_AGE_S,
            "Allow": _ALLOW_METHODS}


@web.middleware
async def cors_middleware(request: web.Request, handler):
    """Answers OPTIONS on any existing route with 204 and the CORS headers; everything else goes on."""
    if request.method != "OPTIONS":
        return await handler(request)
    error = request.match_info.http_exception
    if error is not None and error.status == 404:
        return await handler(request)
    return web.Response(status=204, headers=_preflight_headers(request))


async def add_cors_origin(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare hook: every response (also a stream, whose headers leave before the handler returns)
    says any origin may read it."""
    response.headers.setdefault("Access-Control-Allow-Origin", "*")
    response.headers.setdefault("Access-Control-Expose-Headers", "Retry-After")


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


def install(app: web.Application) -> None:
    """Adds the CORS response hook and the trailing-slash routes (the middleware goes in the app's list)."""
    app.on_response_prepare.append(add_cors_origin)
    add_trailing_slash_routes(app)
