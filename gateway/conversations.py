"""Gateway process: OpenAI's Conversations API (/v1/conversations), conversations kept in this gateway's memory, and
the `conversation` a /v1/responses request adds its items to.

As OpenAI's API reference describes it (the openai SDK's client.conversations and .conversations.items; the Agents
SDK's OpenAIConversationsSession reads and writes a session through them): a conversation is {id: conv_..., object:
conversation, created_at, metadata} holding items (up to 20 given at creation or per items.create); its items are
listed as the Responses input_items are (gateway.responses_listing: newest first unless order=asc, limit, after);
deleting a conversation answers {id, object: conversation.deleted, deleted: true}, deleting an item the conversation.
A response created with `conversation` (its id, or {"id"}) reads the conversation's items before its input, and its
input and output items are added to it once it ended (not after a failure); it cannot also name a
previous_response_id. Conversations are kept in the ItemStore of the recent responses (the same bound, least
recently used out): one another gateway replica holds, or one aged out, is a 404.
"""
from __future__ import annotations

import re
import time
from typing import Any, Optional

from aiohttp import web

from gateway.errors import ApiError, InvalidRequest, NotFound, renamed
from gateway.responses_input import input_messages
from gateway.responses_items import ItemStore
from gateway.responses_listing import check_include, listed_item, page
from gateway.responses_schema import RESPONSES_SCHEMA
from gateway.responses_store import new_id, with_ids
from gateway.schema_validate import validate
from gateway.web import json_response, read_json

MAX_ITEMS_PER_REQUEST = 20
MAX_METADATA_KEYS = 16
_INPUT = re.compile(r"\binput\b")
# Items are checked as a /v1/responses input is: its schema first (each item an object, its type a string), then
# input_messages, which reads them as that schema left them.
_ITEMS_SCHEMA = {"type": "object", "properties": {"input": RESPONSES_SCHEMA["properties"]["input"]}}


def conversation_id(body: Any) -> Optional[str]:
    """The id a Responses body's `conversation` names (a string, or {"id"}); None without one."""
    value = body.get("conversation") if isinstance(body, dict) else None
    if isinstance(value, dict):
        value = value.get("id")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidRequest("'conversation' must be a conversation id or {\"id\": ...}", param="conversation")
    if body.get("previous_response_id") is not None:
        raise InvalidRequest("Mutually exclusive parameters: 'previous_response_id' and 'conversation'. Send one: "
                             "a conversation already holds the earlier turns", param="conversation")
    return value


def _checked_items(value: Any, where: str = "items") -> list:
    """A request's items, each checked as a Responses input item (its 400 naming items[i]), with an id each; an
    item of a wrong JSON type, or with a type field that is no string, is that 400 too (a 500 before)."""
    if value is None or value == []:
        return []
    if not isinstance(value, list):
        raise InvalidRequest(f"'{where}' must be a list of items", param=where, code="invalid_type")
    if len(value) > MAX_ITEMS_PER_REQUEST:
        raise InvalidRequest(f"'{where}' holds {len(value)} items; at most {MAX_ITEMS_PER_REQUEST} are added at "
                             f"once", param=where)
    try:
        validate({"input": value}, _ITEMS_SCHEMA)
        input_messages(value, None)
    except ApiError as exc:
        raise renamed(exc, [(_INPUT, where)]) from None
    return [listed_item(item) for item in with_ids(value)]


async def _body(request: web.Request) -> dict:
    body = await read_json(request)
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", code="invalid_type")
    return body


def _metadata(body: dict) -> dict:
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or len(metadata) > MAX_METADATA_KEYS or not all(
            isinstance(value, str) for value in metadata.values()):
        raise InvalidRequest(f"'metadata' must be an object of at most {MAX_METADATA_KEYS} string values",
                             param="metadata")
    return metadata


class Conversations:
    """conv_... -> {id, created_at, metadata, items}, in an ItemStore."""

    def __init__(self, store: ItemStore):
        self.store = store

    def get(self, conv_id: str, param: str = "conversation_id") -> dict:
        kept = self.store.get(conv_id) if conv_id.startswith("conv_") else None
        if kept is None:
            raise NotFound(f"Conversation with id '{conv_id}' not found: this server keeps conversations in the "
                           f"memory of the gateway that created them (recent ones only)", param=param,
                           code="conversation_not_found")
        return kept

    def put(self, conversation: dict) -> None:
        self.store.keep(None, [conversation])

    def append(self, conv_id: str, items: list) -> None:
        """Adds a response's input and output items to its conversation, if it is still held."""
        conversation = self.store.get(conv_id)
        if conversation is not None:
            conversation["items"] += [listed_item(item) for item in items]
            self.put(conversation)


def _public(conversation: dict) -> dict:
    return {"id": conversation["id"], "object": "conversation", "created_at": conversation["created_at"],
            "metadata": conversation["metadata"]}


class ConversationRoutes:
    """/v1/conversations and its items."""

    def __init__(self, conversations: Conversations):
        self.conversations = conversations

    def register(self, app: web.Application) -> None:
        app.router.add_post("/v1/conversations", self.create)
        app.router.add_get("/v1/conversations/{conversation_id}", self.retrieve)
        app.router.add_post("/v1/conversations/{conversation_id}", self.update)
        app.router.add_delete("/v1/conversations/{conversation_id}", self.delete)
        app.router.add_get("/v1/conversations/{conversation_id}/items", self.list_items)
        app.router.add_post("/v1/conversations/{conversation_id}/items", self.add_items)
        app.router.add_get("/v1/conversations/{conversation_id}/items/{item_id}", self.get_item)
        app.router.add_delete("/v1/conversations/{conversation_id}/items/{item_id}", self.delete_item)

    def _get(self, request: web.Request) -> dict:
        return self.conversations.get(request.match_info["conversation_id"])

    async def create(self, request: web.Request) -> web.Response:
        body = await _body(request)
        conversation = {"id": new_id("conv"), "created_at": int(time.time()), "metadata": _metadata(body),
                        "items": _checked_items(body.get("items"))}
        self.conversations.put(conversation)
        return json_response(_public(conversation))

    async def retrieve(self, request: web.Request) -> web.Response:
        return json_response(_public(self._get(request)))

    async def update(self, request: web.Request) -> web.Response:
        # The body first: the conversation read before it arrived would drop the items added meanwhile when put back.
        metadata = _metadata(await _body(request))
        conversation = self._get(request)
        conversation["metadata"] = metadata
        self.conversations.put(conversation)
        return json_response(_public(conversation))

    async def delete(self, request: web.Request) -> web.Response:
        conversation = self._get(request)
        self.conversations.store.discard(conversation["id"])
        return json_response({"id": conversation["id"], "object": "conversation.deleted", "deleted": True})

    async def list_items(self, request: web.Request) -> web.Response:
        return json_response(page(self._get(request)["items"], request))

    async def add_items(self, request: web.Request) -> web.Response:
        check_include(request.query)
        items = _checked_items((await _body(request)).get("items"))
        conversation = self._get(request)
        conversation["items"] += items
        self.conversations.put(conversation)
        return json_response({"object": "list", "data": items, "first_id": items[0]["id"] if items else None,
                              "last_id": items[-1]["id"] if items else None, "has_more": False})

    def _item(self, conversation: dict, item_id: str) -> int:
        for index, item in enumerate(conversation["items"]):
            if item.get("id") == item_id:
                return index
        raise NotFound(f"Item with id '{item_id}' not found in conversation '{conversation['id']}'",
                       param="item_id", code="item_not_found")

    async def get_item(self, request: web.Request) -> web.Response:
        check_include(request.query)
        conversation = self._get(request)
        return json_response(conversation["items"][self._item(conversation, request.match_info["item_id"])])

    async def delete_item(self, request: web.Request) -> web.Response:
        conversation = self._get(request)
        del conversation["items"][self._item(conversation, request.match_info["item_id"])]
        self.conversations.put(conversation)
        return json_response(_public(conversation))
