"""Gateway process: aiohttp app factory, middlewares (errors, auth, metrics), `python -m gateway.app`."""
from __future__ import annotations

import asyncio
import functools
import logging
import secrets
from typing import Optional, Sequence

from aiohttp import web

from gateway import cors, http_compat, metrics, request_id_header
from gateway.access_log import CLIENT_CLOSED, log_departure
from gateway.anthropic_shape import anthropic_error_response, is_anthropic_request
from gateway.body import BODY_TIMEOUT_KEY, forget_body
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig, parse_config
from gateway.engine import Engine
from gateway.errors import (ApiError, InternalError, MethodNotAllowed, NotFound, PayloadTooLarge, Unauthorized,
                            Unavailable)
from gateway.http_server import KEEP_ALIVE_TIMEOUT_KEY, api_error_response, serve
from gateway.http_stream import STREAM_RESPONSE_KEY
from gateway.llama_cpp_shape import is_llama_cpp_path
from gateway.malloc_threshold import fix_mmap_threshold
from gateway.open_files import raise_open_files_limit
from gateway.route_hints import base_url_hint
from gateway.routes import register_routes
from gateway.web import BODY_LIMIT_KEY

log = logging.getLogger("sparkinfer.gateway")
ENGINE_KEY = web.AppKey("engine", Engine)
CONFIG_KEY = web.AppKey("config", GatewayConfig)
PREFETCH_KEY = web.AppKey("prefetch", asyncio.Task)
# Routes answered without the API key: the probes, and llama-server's model list at /models (one of its public
# endpoints; /v1/models keeps vLLM's key check).
_OPEN_PATHS = ("/health", "/v1/health", "/ping", "/health_generate", "/metrics", "/version", "/", "/models")


def _http_error(exc: web.HTTPException, request: web.Request) -> ApiError:
    path = request.path
    if exc.status == 404:
        return NotFound(f"no route {path}{base_url_hint(request)}", code="not_found")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        # RFC 9110: a 405 lists the methods the route takes.
        allow = ", ".join(sorted(exc.allowed_methods))
        return MethodNotAllowed(f"method {exc.method} not allowed on {path}; use {allow}", headers={"Allow": allow})
    if exc.status == 413:
        return PayloadTooLarge(f"request body too large: {exc.text}")
    return ApiError(exc.text or exc.reason)


def _error_response(request: web.Request, error: ApiError) -> web.Response:
    """The error in the shape of the API the request speaks: the path's, or Anthropic's for its SDKs' /v1/models. An
    error that says Connection: close (a body cut off or late) closes it: aiohttp took the header alone for keep-alive
    and went on reading the rest of that body for its lingering time (10 s) first."""
    if is_anthropic_request(request):
        # One id for the request: the access log's and X-Request-Id's, and the SDK's APIStatusError.request_id.
        rid = request_id_header.request_id(request)
        response = anthropic_error_response(error, rid)
        response.headers[request_id_header.HEADER] = rid
    else:
        response = api_error_response(request.path, error)
    if error.headers.get("Connection", "").lower() == "close":
        response.force_close()
    return response


@web.middleware
async def error_middleware(request: web.Request, handler):
    """Every failure leaves as an error in the route's API shape; only a server bug is a 500."""
    started = asyncio.get_running_loop().time()
    try:
        response = await handler(request)
    except ApiError as exc:
        response = _error_response(request, exc)
        metrics.REJECTED.labels(reason=exc.code or exc.type).inc()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        error = _http_error(exc, request)
        error.status = exc.status
        response = _error_response(request, error)
    except asyncio.CancelledError:
        # The client went away (aiohttp cancels the handler): counted and logged here, streamed or not.
        _count_departure(request, started)
        raise
    except ConnectionResetError as exc:
        # A stream's write reached the closed connection before aiohttp's cancel did: the same departure. Re-raised
        # as it is, aiohttp took it for a handler fault (an ERROR "Error handling request" traceback per such
        # disconnect, and a 500 for a socket already gone); as a cancel it closes the connection quietly.
        _count_departure(request, started)
        raise asyncio.CancelledError() from exc
    except Exception as exc:  # noqa: BLE001 - a server bug: log it, answer 500
        log.exception("unhandled error on %s %s", request.method, request.path)
        response = _error_response(request, InternalError(f"internal error: {exc!r}"))
    finally:
        # aiohttp holds an idle keep-alive connection's last request: it must not pin that request's body.
        forget_body(request)
    metrics.count_http_request(_route_name(request), request.method, response.status,
                               asyncio.get_running_loop().time() - started)
    return response


def _count_departure(request: web.Request, started: float) -> None:
    """A request its client left is an HTTP request too: under the status its stream's headers carried, or 499
    (nginx's "client closed request") when it left before any answer. It was in no http_requests_total series, and
    had no access-log line."""
    metrics.CLIENT_DISCONNECTED.inc()
    stream = request.get(STREAM_RESPONSE_KEY)
    status = CLIENT_CLOSED if stream is None else stream.status
    seconds = asyncio.get_running_loop().time() - started
    metrics.count_http_request(_route_name(request), request.method, status, seconds)
    log_departure(request, stream, seconds, request_id_header.request_id(request))


def _route_name(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else metrics.UNMATCHED_ROUTE


def check_api_key(request: web.Request, api_key: Optional[str]) -> None:
    """Unauthorized unless the route is open, no key is configured, or the Bearer token is the key (on Anthropic's
    routes, and with anthropic-version on /v1/models or a path no route serves, x-api-key too, the header
    Anthropic's clients send: either one holding a key gets in, since Claude Code sends both, the Bearer one from
    ANTHROPIC_AUTH_TOKEN, which setup guides fill with a placeholder to skip its login, and x-api-key from
    ANTHROPIC_API_KEY; on llama-server's own routes the key as it reads it, llama_server_key)."""
    if api_key and (request.path.rstrip("/") or "/") not in _OPEN_PATHS:
        anthropic, llama_cpp = is_anthropic_request(request), is_llama_cpp_path(request.path)
        if llama_cpp:
            given = [llama_server_key(request)]
        else:
            header = request.headers.get("Authorization", "")
            given = [header[7:].strip() if header.lower().startswith("bearer ") else ""]
            if anthropic:
                given.append(request.headers.get("x-api-key", ""))
        if not any(key_matches(sent, api_key) for sent in given):
            how = "'x-api-key: <key>' or " if anthropic or llama_cpp else ""
            raise Unauthorized(f"missing or invalid API key: send {how}'Authorization: Bearer <key>'")


def key_matches(given: str, api_key: str) -> bool:
    """Whether `given` is one of the keys api_key holds: one, or several separated by commas, as llama-server's
    --api-key takes them (common/arg.cpp: "multiple keys can be provided as a comma-separated list") and vLLM's
    --api-key takes a list ("the server will require one of these keys")."""
    # As bytes: compare_digest refuses str with non-ASCII characters (a TypeError, so a 500).
    sent = given.encode("utf-8", "surrogateescape")
    return any([secrets.compare_digest(sent, key) for key in _keys(api_key)])


@functools.lru_cache(maxsize=4)
def _keys(api_key: str) -> tuple:
    """The keys SPARKINFER_API_KEY holds, as bytes, blanks dropped: split once, not on every request."""
    return tuple(key.strip().encode("utf-8") for key in api_key.split(",") if key.strip())


def llama_server_key(request: web.Request) -> str:
    """The key as llama-server's middleware_validate_api_key reads it (tools/server/server-http.cpp): the
    Authorization header, its "Bearer " prefix dropped if there, else X-Api-Key (which it takes for Anthropic's
    clients). A bare `Authorization: <key>` or `x-api-key: <key>` to /completion was a 401 here."""
    header = request.headers.get("Authorization", "").strip()
    if not header:
        return request.headers.get("x-api-key", "")
    # Case-blind, as the Bearer scheme's name is (RFC 9110) and the other routes read it.
    return header[7:].strip() if header.lower().startswith("bearer ") else header


def _check_expecting(request: web.Request, api_key: Optional[str]) -> None:
    """What a request that sends Expect: 100-continue is refused for before its body comes: its origin, its key."""
    cors.check_origin(request)
    check_api_key(request, api_key)


def auth_middleware(api_key: Optional[str]):
    """aiohttp middleware that runs check_api_key (401 unless the route is open or the Bearer token, or on Anthropic
    routes x-api-key, is `api_key`) before the handler; None checks nothing."""
    @web.middleware
    async def check_key(request: web.Request, handler):
        check_api_key(request, api_key)
        return await handler(request)
    return check_key


async def _prefetch_card(app: web.Application) -> None:
    """Fetches the model card in the background so the first request does not wait for it."""
    engine = app[ENGINE_KEY]
    for _ in range(600):
        try:
            await engine.card()
            return
        except ApiError:
            await asyncio.sleep(0.5)


def create_app(config: GatewayConfig, client: Optional[SchedulerClient] = None) -> web.Application:
    """The gateway app; `client` lets tests point it at a fake scheduler."""
    app = web.Application(middlewares=[cors.preflight_middleware(api_error_response), error_middleware,
                                       cors.origin_middleware, auth_middleware(config.api_key)],
                          client_max_size=config.max_body_bytes)
    app[CONFIG_KEY] = config
    app[cors.CORS_KEY] = cors.CorsPolicy(config.allowed_origins, config.allow_credentials)
    app[BODY_LIMIT_KEY] = config.max_body_bytes
    app[BODY_TIMEOUT_KEY] = config.body_timeout_s
    app[KEEP_ALIVE_TIMEOUT_KEY] = config.keep_alive_timeout_s
    http_compat.use_expect_handler(app.router, http_compat.expect_handler(
        config.max_body_bytes, api_error_response, lambda request: _check_expecting(request, config.api_key)))
    # The grpc.aio channel must be made on the loop that serves the app, so it opens at startup.
    app[ENGINE_KEY] = Engine(client, config.served_model_name, config.skip_model_name_validation,
                             config.default_chat_template_kwargs, config.chat_template, config.force_include_usage,
                             config.exclude_tools_when_tool_choice_none)
    register_routes(app, app[ENGINE_KEY], config)
    http_compat.install(app)
    request_id_header.install(app)

    async def on_startup(app: web.Application) -> None:
        if app[ENGINE_KEY].client is None:
            app[ENGINE_KEY].client = SchedulerClient(config.scheduler_addr)
        app[PREFETCH_KEY] = asyncio.create_task(_prefetch_card(app))

    async def on_cleanup(app: web.Application) -> None:
        app[PREFETCH_KEY].cancel()
        await app[ENGINE_KEY].client.close()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Entry point `python -m gateway.app`: config from flags and SPARKINFER_* variables, logged once; serves until
    SIGTERM / SIGINT, then drains (drain_grace_s)."""
    # First, so that no big block is freed under glibc's dynamic threshold (gateway/malloc_threshold.py).
    fix_mmap_threshold()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s gateway %(levelname)s %(message)s")
    config = parse_config(argv)
    log.info("config %s", config.printable())
    old_limit, new_limit = raise_open_files_limit()
    if new_limit != old_limit:
        log.info("open-file limit raised from %d to %d (the hard limit) for client connections", old_limit, new_limit)
    app = create_app(config)
    serve(app, config.host, config.port,
          on_ready=lambda: log.info("serving on http://%s:%d", config.host, config.port),
          drain_grace_s=config.drain_grace_s,
          on_grace_end=lambda early: _end_the_rest(app[ENGINE_KEY], config, early),
          access_log=config.access_log, access_log_excluded_paths=config.access_log_excluded_paths)


def _end_the_rest(engine: Engine, config: GatewayConfig, early: bool) -> None:
    """The drain grace is over, or a second signal ended it (early): what still runs ends with a 503 (an error event
    in a stream already answering)."""
    grace = (f"the request did not finish within its drain grace of {config.drain_grace_s:g} s "
             "(SPARKINFER_DRAIN_GRACE_S)")
    why = "a second stop signal ended the drain before the request finished" if early else grace
    num = engine.abort_all(Unavailable(f"the server is shutting down: {why}"))
    if num:
        log.info("stopping: %d requests still running after the drain grace end with a 503", num)


if __name__ == "__main__":
    main()
