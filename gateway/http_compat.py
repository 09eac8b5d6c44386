"""Gateway process: HTTP details clients rely on: HEAD, trailing slashes, Expect: 100-continue (CORS: gateway.cors).

HEAD is served beside every GET route. Runs of slashes in a path are read as one (`//v1/models`). A path with one
trailing slash (`/v1/chat/completions/`, as some SDKs build it from a base URL ending in '/') is served by the
same handler instead of a 404, which clients that do not follow redirects would get from a redirect too. A
request that sends `Expect: 100-continue` without a valid API key, or with a Content-Length over the body limit,
gets its 401 or 413 at once, before the client sends the body (aiohttp's default would invite the whole body
first); an Expect other than 100-continue is a 417; each in the route's API error shape.
"""
from __future__ import annotations

import re
from typing import Awaitable, Callable

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11

from yarl import URL

from gateway import cors
from gateway.errors import ApiError, PayloadTooLarge


_SLASHES = re.compile(r"/{2,}")


class ExpectationFailed(ApiError):
    """417: an Expect header other than 100-continue."""
    status = 417
    type = "invalid_request_error"
    code = "expectation_failed"


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


def merging_slashes(request_factory: Callable) -> Callable:
    """aiohttp's request factory (web.Server.request_factory), with runs of slashes in the path merged into one before
    the request is routed, as nginx reads a URI (merge_slashes, on by default, and passed on merged by a proxy_pass
    with a URI): a client joining a base URL that ends in '/' with a path that starts with one asks for
    `//v1/chat/completions` (litellm-vscode-chat#53, aichat#767), a 404 that named no cause. The query and
    percent-encoded slashes (%2F) are kept as sent."""
    def make(message, *args):
        if "//" in message.url.raw_path:
            path = _SLASHES.sub("/", message.url.raw_path)
            url = URL.build(path=path, query_string=message.url.raw_query_string, encoded=True)
            message = message._replace(path=str(url), url=url)
        return request_factory(message, *args)
    return make


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
    """Adds the CORS response hook (gateway.cors), HEAD beside GET and the trailing-slash routes (the CORS
    middlewares go in the app's list)."""
    app.on_response_prepare.append(cors.add_cors_headers)
    add_head_routes(app)
    add_trailing_slash_routes(app)
