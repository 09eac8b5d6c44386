"""Gateway process: aiohttp handlers of OpenAI's Responses API (/v1/responses) over the chat route.

POST /v1/responses is translated into the chat route's request (gateway.responses_request) and shaped back
(gateway.responses_shape); admission (a 429 before any byte), keep-alives and disconnects are the shared streaming
loop's. A finished response's turn (its input and output items) is kept unless store is false, so that
previous_response_id continues it (gateway.response_threads), and its output items for item_reference
(gateway.responses_items); no Response object is kept to read back, so the routes that read one answer 404 in
OpenAI's error shape, and POST /v1/responses/compact (server-side compaction) is a 501 that says so.
"""
from __future__ import annotations

import functools
from typing import Any

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.engine import Engine
from gateway.errors import NotFound, NotImplementedApi
from gateway.http_stream import stream_generation
from gateway.offload import run_cpu
from gateway.responses_input import NOT_STORED
from gateway.response_threads import ResponseThreads, Thread
from gateway.responses_items import ItemStore
from gateway.responses_request import count_input_tokens, parse_responses
from gateway.responses_run import ResponseRun
from gateway.responses_stream import ResponsesFramer, complete
from gateway.openai_plan import check_model
from gateway.web import json_response, read_json


class ResponsesRoutes:
    """/v1/responses: create (streamed or not) and input_tokens; retrieve, delete, cancel and input_items find nothing
    stored."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine, self.config = engine, config
        self.items = ItemStore()
        self.threads = ResponseThreads("/v1/responses")

    def register(self, app: web.Application) -> None:
        """Adds the Responses API (create, input_tokens, compact, with and without /v1) and the stored-response routes,
        which answer 404."""
        app.router.add_post("/v1/responses", self.create)
        app.router.add_post("/v1/responses/input_tokens", self.input_tokens)
        # llama.cpp's server serves both without /v1 too (a client whose base URL has no /v1 posts there).
        app.router.add_post("/responses", self.create)
        app.router.add_post("/responses/input_tokens", self.input_tokens)
        # OpenAI's compaction endpoint (the SDKs' responses.compact): it matched /v1/responses/{response_id} and got a
        # 405 that offered GET, DELETE and HEAD.
        app.router.add_post("/v1/responses/compact", self.compact)
        app.router.add_post("/responses/compact", self.compact)
        app.router.add_get("/v1/responses/{response_id}", self.not_stored)
        app.router.add_delete("/v1/responses/{response_id}", self.not_stored)
        app.router.add_post("/v1/responses/{response_id}/cancel", self.not_stored)
        app.router.add_get("/v1/responses/{response_id}/input_items", self.not_stored)

    async def create(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/responses: a Response, or streamed as its events (stream true); item_reference items resolve against
        the output items of recent responses, and previous_response_id's turns come before the input."""
        body = self.items.resolve(await read_json(request))
        thread = self.threads.thread(body)
        card = await self.engine.card()
        plan = await run_cpu(parse_responses, continued(body, thread), card, await self.engine.served_name(),
                             self.config.exclude_tools_when_tool_choice_none)
        run = ResponseRun(plan, card, on_done=functools.partial(self._keep, body, thread, plan.response_id))
        gen = await self.engine.start(plan.chat.gen)
        if plan.chat.stream:
            return await stream_generation(request, gen, ResponsesFramer(run), self.config.sse_keepalive_s)
        return json_response(await complete(run, gen))

    def _keep(self, body: Any, thread: Thread, response_id: str, output: list) -> None:
        """A finished response's output items (for item_reference) and its turn (for previous_response_id), unless
        its request said store: false."""
        self.items.keep(body, output)
        self.threads.keep(body, thread, input_items(body) + output, response_id=response_id)

    async def input_tokens(self, request: web.Request) -> web.Response:
        """OpenAI's input token count of a Responses body: the prompt create would render, to the token."""
        body = self.items.resolve(await read_json(request))
        body = continued(body, self.threads.thread(body))
        card = await self.engine.card()
        num_tokens = await run_cpu(count_input_tokens, body, card, await self.engine.served_name(),
                                   self.config.exclude_tools_when_tool_choice_none)
        return json_response({"object": "response.input_tokens", "input_tokens": num_tokens})

    async def compact(self, request: web.Request) -> web.Response:
        """POST /v1/responses/compact: an unknown model is its 404; otherwise 501 (no compaction here) with
        x-should-retry false."""
        body = await read_json(request)
        # A model this server does not serve is the 404 every other route gives it.
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            check_model(body["model"], await self.engine.card(), await self.engine.served_name())
        # `x-should-retry: false` stops the OpenAI SDKs retrying a 5xx (they honour that header).
        raise NotImplementedApi("response compaction (POST /v1/responses/compact) is not supported: this server "
                                "writes no compaction items; send a shorter input, or truncation \"auto\" to have "
                                "the oldest input items left out", code="not_supported",
                                headers={"x-should-retry": "false"})

    async def not_stored(self, request: web.Request) -> web.Response:
        """GET / DELETE /v1/responses/{id}, its cancel and input_items: 404 response_not_found, nothing is stored to
        read back."""
        response_id = request.match_info["response_id"]
        raise NotFound(f"Response with id '{response_id}' not found: {NOT_STORED}", param="response_id",
                       code="response_not_found")


def input_items(body: Any) -> list:
    """A Responses body's own input as a list of items (a string is one user message)."""
    value = body.get("input") if isinstance(body, dict) else None
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


def continued(body: Any, thread: Thread) -> Any:
    """The body with the turns of the conversation it continues (previous_response_id) before its own input; OpenAI
    carries the earlier input and output items over, not the earlier instructions."""
    if thread.parent_id is None:
        return body
    return {**body, "input": thread.messages + input_items(body)}
