"""Gateway process: the prefix-cache reset routes benchmark scripts call between runs, vLLM's POST /reset_prefix_cache
and SGLang's GET / POST /flush_cache, over the scheduler's ResetPrefixCache.

/reset_prefix_cache: 200 with no body, as vLLM's dev route answers it (vllm/entrypoints/serve/cache/api_router.py;
                     vLLM serves it under VLLM_SERVER_DEV_MODE=1); its reset_running_requests and reset_external query
                     flags change nothing here (a running request keeps the blocks it shares; no external cache).
/flush_cache:        200 text/plain with SGLang's words (python/sglang/srt/entrypoints/http_server.py). SGLang refuses
                     (400) while requests run or wait; here the entries can go at any time, so it always flushes.
An unreachable scheduler is the usual 503. Both need the API key where one is set, as the other routes.
"""
from __future__ import annotations

from aiohttp import web

from gateway.engine import Engine

FLUSHED = ("Cache flushed.\nPlease check backend logs for more details. "
           "(When there are running or waiting requests, the operation will not be performed.)\n")


class PrefixCacheRoutes:
    """POST /reset_prefix_cache (vLLM) and GET / POST /flush_cache (SGLang)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def register(self, app: web.Application) -> None:
        """Adds vLLM's POST /reset_prefix_cache and SGLang's GET / POST /flush_cache."""
        app.router.add_post("/reset_prefix_cache", self.reset_prefix_cache)
        app.router.add_route("GET", "/flush_cache", self.flush_cache)
        app.router.add_post("/flush_cache", self.flush_cache)

    async def reset_prefix_cache(self, request: web.Request) -> web.Response:
        """POST /reset_prefix_cache: the scheduler drops its ready prefix-cache entries; 200, empty body (vLLM)."""
        await self.engine.client.reset_prefix_cache()
        return web.Response(status=200)

    async def flush_cache(self, request: web.Request) -> web.Response:
        """GET / POST flush; HEAD (which every GET route answers, http_compat) only describes the answer: a safe
        method has no effect on the server (RFC 9110 9.2.1), so a monitor's HEAD probe must not empty the cache."""
        if request.method != "HEAD":
            await self.engine.client.reset_prefix_cache()
        return web.Response(status=200, text=FLUSHED, content_type="text/plain")
