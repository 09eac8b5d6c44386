"""Gateway process: cancelling running requests by id, as vLLM's cancel routes (vllm/entrypoints/serve/cancel/
api_router.py) and SGLang's POST /abort_request (http_server.abort_request) do it. A cancelled choice ends with
finish_reason "abort" and the text it had (SGLang's /generate: {"type": "abort", ...}), as vLLM's engine abort ends
the output of a request aborted by id; its scheduler call is cancelled, its KV blocks freed.

The ids: a /v1/chat/completions or /v1/completions request's response id (chatcmpl-..., cmpl-...: the X-Request-Id or
request_id it was sent with, prefixed, as vLLM names its engine request), a /generate request's rid (its items'
rid_i), an /inference/v1/generate request's answered request_id (generate-tokens-...). Other APIs' requests are not
cancelled by id.

POST /v1/requests/{id}/cancel, DELETE /v1/requests/{id}: {"status": "cancelled", "request_id"}; 404 "Request {id} not
found or already completed." for an id with nothing running.
POST /v1/requests/cancel {"request_ids"}: {"status": "cancelled", "cancelled_request_ids": those that ran}.
POST /abort_requests {"request_ids"} (optional): the same; without ids, every request that can be cancelled by id.
POST /abort_request {"rid", "abort_all", "prefix"} (SGLang): the request with that rid (a /generate batch's whole rid
too), every one whose rid starts with it with prefix (SGLang PR #30912), all with abort_all; an empty 200.
POST /v1/internal/stop-generation (text-generation-webui's, extensions/openai/script.py: stop_everything_event, then
the JSON string "OK"): the running /v1/completions or /v1/chat/completions request, the routes its API serves, when it
is the only one; with several running, none (text-generation-webui runs one generation at a time and its stop ends
that one: a request waiting behind it runs on, so one client's cancel never ends another's). It was a 404, which its
clients (ComfyUI text-generation nodes, chat bots' "cancel" buttons) raise for.
"""
from __future__ import annotations

from aiohttp import web

from gateway.engine import Engine
from gateway.errors import InvalidRequest, NotFound
from gateway.web import json_response, read_json


def _object(body):
    """The body, or the 400 for one that is no JSON object (vLLM's and SGLang's request models: FastAPI's 422)."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", param=None)
    return body


def _ids(body, key: str) -> list:
    ids = body.get(key) if isinstance(body, dict) else None
    if ids is not None and not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
        raise InvalidRequest(f"{key} must be a list of request ids", param=key)
    return ids or []


async def _optional_body(request: web.Request):
    """The JSON body, {} when there is none or it does not parse (vLLM's /abort_requests reads it so)."""
    if not request.body_exists:
        return {}
    try:
        return await read_json(request)
    except InvalidRequest:
        return {}


class CancelRoutes:
    """vLLM's /v1/requests/{id}/cancel, DELETE /v1/requests/{id}, /v1/requests/cancel, /abort_requests; SGLang's
    /abort_request."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def register(self, app: web.Application) -> None:
        """Adds vLLM's cancel routes and SGLang's /abort_request."""
        app.router.add_post("/v1/requests/cancel", self.cancel_many)
        app.router.add_post("/v1/requests/{request_id}/cancel", self.cancel_one)
        app.router.add_delete("/v1/requests/{request_id}", self.cancel_one)
        app.router.add_post("/abort_requests", self.abort_requests)
        app.router.add_post("/abort_request", self.abort_request)
        app.router.add_post("/v1/internal/stop-generation", self.stop_generation)

    async def cancel_one(self, request: web.Request) -> web.Response:
        """POST /v1/requests/{id}/cancel and DELETE /v1/requests/{id}: the request's running choices end "abort"; 404
        when none runs."""
        request_id = request.match_info["request_id"]
        if not self.engine.cancel(lambda cancel_id: cancel_id == request_id):
            raise NotFound(f"Request {request_id} not found or already completed.", code="not_found")
        return json_response({"status": "cancelled", "request_id": request_id})

    async def cancel_many(self, request: web.Request) -> web.Response:
        """POST /v1/requests/cancel {request_ids}: each running one ends "abort"; the ids cancelled."""
        wanted = set(_ids(_object(await read_json(request)), "request_ids"))
        return self._cancelled(wanted.__contains__)

    async def abort_requests(self, request: web.Request) -> web.Response:
        """POST /abort_requests (vLLM): the listed request_ids, or every request when none are given, end "abort"."""
        wanted = set(_ids(await _optional_body(request), "request_ids"))
        return self._cancelled(wanted.__contains__ if wanted else lambda cancel_id: True)

    async def abort_request(self, request: web.Request) -> web.Response:
        """POST /abort_request (SGLang): ends the request `rid` (every one with abort_all, those whose id starts with
        rid with prefix); 200 with an empty body, as SGLang answers."""
        body = _object(await read_json(request))
        rid = body.get("rid") or ""
        if not isinstance(rid, str):
            raise InvalidRequest("rid must be a string", param="rid")
        if body.get("abort_all"):
            self.engine.cancel(lambda cancel_id: True)
        elif rid and body.get("prefix"):
            self.engine.cancel(lambda cancel_id: cancel_id.startswith(rid))
        elif rid:
            self.engine.cancel(lambda cancel_id: cancel_id == rid)
        return web.Response(status=200)

    async def stop_generation(self, request: web.Request) -> web.Response:
        """POST /v1/internal/stop-generation (text-generation-webui): the running completion or chat completion ends
        "abort" with the text it had when it runs alone, as its stop_everything_event ends its one generation (each
        generation clears the flag as it starts, under modules/text_generation.py's generation lock: one waiting runs
        on); with several running, none ends: the stop is one client's, and ended every user's. "OK" either way."""
        running = self.engine.cancel_ids(lambda cancel_id: cancel_id.startswith(("cmpl-", "chatcmpl-")))
        if len(running) == 1:
            self.engine.cancel(running[0].__eq__)
        return json_response("OK")

    def _cancelled(self, wanted) -> web.Response:
        done = list(dict.fromkeys(self.engine.cancel(wanted)))
        return json_response({"status": "cancelled", "cancelled_request_ids": done})
