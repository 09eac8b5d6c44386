"""Gateway process: what a 404 says about the base URL a client was given, when the path it asked is a route of this
server behind a prefix too many (a client adds its own path to the base URL it is given)."""
from __future__ import annotations

from aiohttp import web

# The name prefix of a route that takes websocket upgrades only (LM Studio's SDK namespaces: /llm, /files, ...).
WEBSOCKET_ROUTE = "ws:"


def _plain_paths(app: web.Application, websocket: bool) -> set:
    """The paths the app's routes serve as they are (none with a {variable}; not "/", which every path ends in), the
    websocket routes only for a websocket upgrade: LM Studio's SDK namespace /files made an Anthropic or OpenAI SDK's
    GET /v1/files (their files API, which this server lacks) a 404 telling the user to drop the /v1 of a right base
    URL."""
    paths = {resource.canonical for resource in app.router.resources()
             if websocket or not (resource.name or "").startswith(WEBSOCKET_ROUTE)}
    return {path for path in paths if "{" not in path and path != "/"}


def doubled_v1_hint(path: str) -> str:
    """A path under /v1/v1/ comes from a base URL ending in /v1 given to a client that adds /v1 itself (the Anthropic
    SDKs and Claude Code add /v1/messages to ANTHROPIC_BASE_URL); vLLM answers it a bare 404 too, so the 404 says
    which base URL to give instead (the OpenAI SDKs take http://host:port/v1, the Anthropic ones http://host:port)."""
    if not path.startswith("/v1/v1/"):
        return ""
    return (" (the base URL given to the client ends in /v1 and the client adds /v1 itself: give it the server's "
            "address without /v1, http://host:port, as the Anthropic SDKs and Claude Code take it)")


def base_url_hint(request: web.Request) -> str:
    """The base URL to give a client whose request missed every route because its base URL held a path of its own:
    the full endpoint (LibreChat's baseURL 'http://localhost:800/chat/completions', danny-avila/LibreChat#4924, asked
    /chat/completions/chat/completions), or an OpenAI-style /v1 given to an Ollama client (Cherry Studio's
    'http://host:11434/v1' asked /v1/api/generate, CherryHQ/cherry-studio#13077). vLLM, Ollama and llama-server
    answer such a path a bare 404, and the user is left to guess. The path is read as a base path and the path the
    client added (the longest tail of it that a route serves, behind a longer prefix of the base path that, with it,
    is a route too): the hint names the base URL that ends in that prefix."""
    path = request.path
    hint = doubled_v1_hint(path)
    if hint or not path.startswith("/"):
        return hint
    routes = _plain_paths(request.app, request.headers.get("Upgrade", "").lower() == "websocket")
    # Empty segments (a %2F the router did not split on) say nothing of the base URL: a path that is a route
    # without them gets no hint.
    segments = [part for part in path.split("/") if part]
    if "/" + "/".join(segments) in routes:
        return ""
    for start in range(1, len(segments)):
        added = "/" + "/".join(segments[start:])
        if added not in routes:
            continue
        base = segments[:start]
        for keep in range(len(base) - 1, -1, -1):
            if "/" + "/".join(base[:keep] + segments[start:]) in routes:
                given, right = "/" + "/".join(base), "".join("/" + part for part in base[:keep])
                return (f" (the client adds {added} to the base URL it was given, which ends in {given}: give it "
                        f"{request.scheme}://{request.host}{right} instead)")
    return ""
