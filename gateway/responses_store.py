"""Gateway process: the /v1/responses Response objects this gateway keeps, read back (GET /v1/responses/{id} and its
input_items), deleted and cancelled as OpenAI's stored responses are (the openai SDKs' responses.retrieve, .delete,
.input_items.list and .cancel; vLLM's serving_responses.py serves retrieve and cancel from its response store).

A response created with `store` true (OpenAI's default) is held from its start: while it runs, as its run (the object
built so far: `queued` until the scheduler admits a background one, then `in_progress`), and once it ended as its turn
in gateway.response_threads' ItemStore, the one previous_response_id reads (the Response object less its output,
which is the turn's last items; bounded, least recently used out). One created with `store: false`, deleted, aged
out or held by another gateway replica is a 404. Only a `background` response can be cancelled, as OpenAI answers
(`POST .../cancel` of another is a 400; of a finished background one it is that response, unchanged); cancelling
ends its generation with the output so far and status `cancelled`. A background response's events are kept while it
runs, to be streamed from any point (gateway.responses_replay).
"""
from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import Any, Optional

from gateway.engine import Generation
from gateway.errors import InvalidRequest, NotFound
from gateway.response_threads import ResponseThreads, Thread
from gateway.responses_items import ItemStore
from gateway.responses_listing import listed_item
from gateway.responses_replay import EndedLogs, EventLog
from gateway.responses_run import ResponseRun

NOT_HELD = ("this server keeps its recent responses in the memory of the gateway that answered them, not those "
            "created with store: false, deleted ones, older ones or another server's")


@dataclass
class Live:
    """A stored response still running: its request, the conversation it continues, its own input items (ids
    given), its run and generation; cancelled or deleted since it began, and a background one's task."""
    body: dict
    thread: Thread
    own_input: list
    run: ResponseRun
    gen: Generation
    cancelled: bool = False
    deleted: bool = False
    task: Optional[asyncio.Task] = field(default=None, repr=False)
    log: Optional[EventLog] = field(default=None, repr=False)   # a background one's events (gateway.responses_replay)

    @property
    def background(self) -> bool:
        return bool(self.body.get("background"))

    def response(self) -> dict:
        """The Response object as it stands: queued (a background one the scheduler has not admitted yet) or
        in_progress, with the output items so far."""
        response = self.run.response(None, "in_progress" if self.gen.admitted or not self.background else "queued")
        return {**response, "output": self.run.output.snapshot()}


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


def with_ids(items: list) -> list:
    """Input items with an id each (msg_... for a message, item_... for another), as OpenAI lists them; an item
    that has one keeps it."""
    out = []
    for item in items:
        if isinstance(item, dict) and not isinstance(item.get("id"), str):
            prefix = "msg" if item.get("type", "message") == "message" else "item"
            item = {**item, "id": new_id(prefix)}
        out.append(item)
    return out


class StoredResponses:
    """Response id -> the running response (Live) or the finished one's turn (ResponseThreads)."""

    def __init__(self, threads: ResponseThreads, items: ItemStore):
        self.threads, self.items = threads, items
        self.live: dict[str, Live] = {}
        self.ended = EndedLogs()   # the events of ended background responses, to resume a stream after the end

    def begin(self, body: dict, thread: Thread, own_input: list, run: ResponseRun, gen: Generation) -> Optional[Live]:
        """Holds a response that starts now; None (nothing held) for `store: false`."""
        if body.get("store") is False:
            return None
        live = Live(body, thread, own_input, run, gen)
        self.live[run.plan.response_id] = live
        return live

    def settle(self, live: Optional[Live], keep: bool = True) -> None:
        """A held response ended: kept as its turn (unless deleted meanwhile, or keep false: a request refused
        before any of it was sent), with status cancelled when it was cancelled or its client left before its end."""
        if live is None:
            return
        response_id = live.run.plan.response_id
        self.live.pop(response_id, None)
        if live.deleted or not keep:
            return
        response = live.run.final
        if response is None or live.cancelled:
            response = {**live.run.response(live.gen.usage(), "cancelled"), "output": live.run.output.snapshot()}
        output = response["output"]
        record = {key: value for key, value in response.items() if key != "output"}
        # A response in a `conversation` (a thread of items, no parent turn) read those items before its input: they
        # are its turn's input, for input_items and for a later previous_response_id to it.
        read = live.own_input if live.thread.parent_id is not None else live.thread.messages + live.own_input
        record["num_input"] = len(read)
        self.items.keep(live.body, output)
        self.threads.keep(live.body, live.thread, read + output, response_id=response_id, record=record)
        if live.log is not None:
            self.ended.keep(response_id, live.log)

    def holds(self, response_id: str) -> bool:
        """Whether a response of that id is held: running, or its turn kept."""
        return response_id in self.live or self.threads.store.get(response_id) is not None

    def retrieve(self, response_id: str) -> dict:
        """The Response object of that id (GET /v1/responses/{id}); 404 when it is not held."""
        live = self.live.get(response_id)
        if live is not None and not live.deleted:
            return live.response()
        turn = self._turn(response_id)
        record = {key: value for key, value in turn["record"].items() if key != "num_input"}
        return {**record, "output": turn["messages"][turn["record"]["num_input"]:]}

    def input_items(self, response_id: str) -> list:
        """The items the response of that id read, oldest first: the earlier turns' input and output items of the
        conversation it continues (those still held), then its own input, each as OpenAI lists it."""
        live = self.live.get(response_id)
        if live is not None and not live.deleted:
            items = live.thread.messages + live.own_input
        else:
            own = self._turn(response_id)
            turns, _ = self.threads.turns(response_id)
            items = [item for turn in turns[:-1] for item in turn["messages"]]
            items += own["messages"][:own["record"]["num_input"]]
        return [listed_item(item) for item in items]

    def delete(self, response_id: str) -> dict:
        """Forgets that response (DELETE /v1/responses/{id}): OpenAI's deleted object; a running one is not kept
        when it ends, and a background one's generation is cancelled (nothing could read it any more)."""
        live = self.live.get(response_id)
        if live is not None and not live.deleted:
            live.deleted = True
            if live.background:
                live.gen.cancel()
        else:
            turn = self._turn(response_id)
            for item in turn["messages"][turn["record"]["num_input"]:]:
                self.items.discard(item.get("id"))
            self.threads.drop(response_id)
            self.ended.drop(response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    async def cancel(self, response_id: str) -> dict:
        """POST /v1/responses/{id}/cancel: a running background response ends now, status cancelled, its output so
        far kept; a finished background one is returned as it is; any other is OpenAI's 400."""
        live = self.live.get(response_id)
        if live is not None and not live.deleted:
            if not live.background:
                raise _not_cancellable(response_id)
            live.cancelled = live.run.cancelled = True
            live.gen.cancel()
            if live.task is not None:
                # The response is settled by its task; the task runs on if this request's client leaves.
                await asyncio.shield(live.task)
            return self.retrieve(response_id)
        response = self.retrieve(response_id)
        if not response.get("background"):
            raise _not_cancellable(response_id)
        return response

    def events(self, response_id: str) -> EventLog:
        """The event log of a background response (GET ...?stream=true), running or ended (kept while the response
        is held and its events fit EndedLogs' bound); 404 when not held, 400 for one not created in the background
        or whose events aged out."""
        live = self.live.get(response_id)
        if live is not None and not live.deleted and live.log is not None:
            return live.log
        self.retrieve(response_id)
        log = self.ended.get(response_id)
        if log is not None:
            return log
        raise InvalidRequest(f"Response '{response_id}' has no events to stream: only a background response's are "
                             f"kept (those of older ones age out); read it without stream", param="stream",
                             code="unsupported_value")

    def _turn(self, response_id: str) -> dict:
        turn = self.threads.store.get(response_id)
        if turn is None or turn.get("record") is None:
            raise NotFound(f"Response with id '{response_id}' not found: {NOT_HELD}", param="response_id",
                           code="response_not_found")
        return turn


def _not_cancellable(response_id: str) -> InvalidRequest:
    return InvalidRequest(f"Response '{response_id}' was not created with background: true; only background "
                          f"responses can be cancelled (close the connection of a streamed one to stop it)",
                          param="response_id")
