"""Gateway process: aiohttp handlers of OpenAI's Responses API (/v1/responses) over the chat route.

POST /v1/responses is translated into the chat route's request (gateway.responses_request) and shaped back
(gateway.responses_shape); admission (a 429 before any byte), keep-alives and disconnects are the shared streaming
loop's. A response is kept unless store is false (gateway.responses_store): read back by its id (GET, input_items),
deleted, and, created with background true, answered at once (queued or in_progress), run on, polled and cancelled,
as OpenAI's background mode; its turn (input and output items) is what previous_response_id continues
(gateway.response_threads), its output items what item_reference reads (gateway.responses_items). POST
/v1/responses/compact (server-side compaction) is a 501 that says so.
"""
from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.conversations import ConversationRoutes, Conversations, conversation_id
from gateway.engine import Engine
from gateway.errors import ApiError, InvalidRequest, NotImplementedApi
from gateway.http_stream import stream_generation
from gateway.offload import run_cpu
from gateway.response_threads import ResponseThreads, Thread
from gateway.responses_items import ItemStore
from gateway.responses_listing import page, retrieve_query
from gateway.responses_replay import EventLog, record, replay
from gateway.responses_store import Live, StoredResponses, with_ids
from gateway.responses_request import count_input_tokens, parse_responses
from gateway.responses_run import ResponseRun
from gateway.responses_stream import ResponsesFramer, complete
from gateway.openai_plan import check_model
from gateway.web import json_response, read_json


class ResponsesRoutes:
    """/v1/responses: create (streamed or not, or in the background) and input_tokens; retrieve, delete, cancel and
    input_items of a stored response."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine, self.config = engine, config
        self.items = ItemStore()
        self.threads = ResponseThreads("/v1/responses")
        self.stored = StoredResponses(self.threads, self.items)
        self.conversations = Conversations(self.threads.store)

    def register(self, app: web.Application) -> None:
        """Adds the Responses API (create, input_tokens, compact, with and without /v1) and the stored-response
        routes."""
        app.router.add_post("/v1/responses", self.create)
        app.router.add_post("/v1/responses/input_tokens", self.input_tokens)
        # llama.cpp's server serves both without /v1 too (a client whose base URL has no /v1 posts there).
        app.router.add_post("/responses", self.create)
        app.router.add_post("/responses/input_tokens", self.input_tokens)
        # OpenAI's compaction endpoint (the SDKs' responses.compact): it matched /v1/responses/{response_id} and got a
        # 405 that offered GET, DELETE and HEAD.
        app.router.add_post("/v1/responses/compact", self.compact)
        app.router.add_post("/responses/compact", self.compact)
        app.router.add_get("/v1/responses/{response_id}", self.retrieve)
        app.router.add_delete("/v1/responses/{response_id}", self.delete)
        app.router.add_post("/v1/responses/{response_id}/cancel", self.cancel)
        app.router.add_get("/v1/responses/{response_id}/input_items", self.list_input_items)
        app.on_cleanup.append(self._end_background)
        ConversationRoutes(self.conversations).register(app)

    async def create(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/responses: a Response, or streamed as its events (stream true), or at once, queued or in_progress,
        with the generation running on (background true); item_reference items resolve against the output items of
        recent responses, and previous_response_id's turns come before the input."""
        body = self.items.resolve(await read_json(request))
        thread = self._thread(body)
        card = await self.engine.card()
        plan = await run_cpu(parse_responses, continued(body, thread), card, await self.engine.served_name())
        if body.get("request_id") and body.get("store") is not False and self.stored.holds(plan.response_id):
            raise InvalidRequest(f"request_id {plan.response_id!r} names a response this server holds; send another "
                                 f"(or none: an id is made)", param="request_id")
        run = ResponseRun(plan, card)
        gen = await self.engine.start(plan.chat.gen)
        live = self.stored.begin(body, thread, with_ids(input_items(body)), run, gen)
        if live is not None and live.background:
            return await self._background(request, live)
        # Kept as it ended; as cancelled when its client left first. One refused or failed before any of it was
        # sent (an error status) is not: its client has no id to read it back by.
        keep = True
        try:
            if plan.chat.stream:
                return await stream_generation(request, gen, ResponsesFramer(run), self.config.sse_keepalive_s)
            return json_response(await complete(run, gen))
        except ApiError:
            keep = False
            raise
        finally:
            self.stored.settle(live, keep)
            self._to_conversation(body, run)

    def _thread(self, body: Any) -> Thread:
        """What the body continues: its conversation's items (conversation), or previous_response_id's turns."""
        conv_id = conversation_id(body)
        if conv_id is None:
            return self.threads.thread(body)
        return Thread(messages=self.conversations.get(conv_id, param="conversation")["items"])

    def _to_conversation(self, body: Any, run: ResponseRun) -> None:
        """A response that ended (not failed) adds its input and output items to its conversation."""
        conv_id = conversation_id(body)
        if conv_id is not None and run.final is not None and run.final["status"] != "failed":
            self.conversations.append(conv_id, with_ids(input_items(body)) + run.final["output"])

    async def _background(self, request: web.Request, live: Live) -> web.StreamResponse:
        """A background response: answered once the scheduler admitted it (a refusal that quick is the request's
        own status) or after a moment, queued, and run to its end by a task of its own, which keeps its events; with
        stream true they are streamed from the start, and the response runs on if this client leaves."""
        try:
            await live.gen.wait_started(min(self.config.sse_keepalive_s, 1.0))
        except ApiError:
            self.stored.settle(live, keep=False)
            raise
        except asyncio.CancelledError:
            # Its client left during that moment: the response runs on, as it does when its client leaves later (a
            # request_id named its id beforehand). Left unstarted it was held in_progress for ever and its generation
            # never closed (requests_in_flight stayed 1, no one read its tokens).
            self._start_background(live)
            raise
        self._start_background(live)
        if live.run.plan.chat.stream:
            return await replay(request, live.log, -1, self.config.sse_keepalive_s)
        return json_response(live.response())

    def _start_background(self, live: Live) -> None:
        """Runs a background response to its end in a task of its own, which keeps its events (live.log)."""
        live.log = EventLog()
        live.task = asyncio.create_task(self._run_background(live))

    async def _run_background(self, live: Live) -> None:
        try:
            await record(live.log, ResponsesFramer(live.run), live.gen)
        finally:
            self.stored.settle(live)
            self._to_conversation(live.body, live.run)

    async def _end_background(self, app: web.Application) -> None:
        """Server shutdown: the background responses still running are cancelled."""
        tasks = [live.task for live in self.stored.live.values() if live.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def input_tokens(self, request: web.Request) -> web.Response:
        """OpenAI's input token count of a Responses body: the prompt create would render, to the token."""
        body = self.items.resolve(await read_json(request))
        body = continued(body, self._thread(body))
        card = await self.engine.card()
        num_tokens = await run_cpu(count_input_tokens, body, card, await self.engine.served_name())
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

    async def retrieve(self, request: web.Request) -> web.Response:
        """GET /v1/responses/{id}: the stored Response object (as it stands while it runs), or with stream=true a
        running background response's events after starting_after; 404 when not held."""
        response_id = request.match_info["response_id"]
        after = retrieve_query(request)
        if after is not None:
            return await replay(request, self.stored.events(response_id), after, self.config.sse_keepalive_s)
        return json_response(self.stored.retrieve(response_id))

    async def delete(self, request: web.Request) -> web.Response:
        """DELETE /v1/responses/{id}: OpenAI's deleted object; the response is no longer held."""
        return json_response(self.stored.delete(request.match_info["response_id"]))

    async def cancel(self, request: web.Request) -> web.Response:
        """POST /v1/responses/{id}/cancel: a background response cancelled (or as it ended)."""
        return json_response(await self.stored.cancel(request.match_info["response_id"]))

    async def list_input_items(self, request: web.Request) -> web.Response:
        """GET /v1/responses/{id}/input_items: the items the response read, as OpenAI's paged list."""
        return json_response(page(self.stored.input_items(request.match_info["response_id"]), request))


def input_items(body: Any) -> list:
    """A Responses body's own input as a list of items (a string is one user message)."""
    value = body.get("input") if isinstance(body, dict) else None
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


def continued(body: Any, thread: Thread) -> Any:
    """The body with the turns of the conversation it continues (previous_response_id) before its own input; OpenAI
    carries the earlier input and output items over, not the earlier instructions."""
    if thread.parent_id is None and not thread.messages:
        return body
    return {**body, "input": thread.messages + input_items(body)}
