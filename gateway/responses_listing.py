"""Gateway process: a stored response's input items as OpenAI lists them (GET /v1/responses/{id}/input_items: a
`list` object, newest first unless `order=asc`, `limit` 1-100 (20), `after` / `before` an item id) and the query
parameters of the routes that read a stored response back.

OpenAI's list holds ResponseItem objects (the openai SDK's types/responses/response_item.py): each item has its id,
a message's content is a list of parts (input_text for user, system and developer messages, output_text with
annotations for an assistant's), and a message or call carries its status. A string message is listed as one part.
"""
from __future__ import annotations

from typing import Any, Optional

from aiohttp import web

from gateway.errors import InvalidRequest
from gateway.responses_schema import INCLUDABLE

MAX_LIMIT = 100
DEFAULT_LIMIT = 20
_STATUS_TYPES = ("message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output")


def _parts(content: Any, assistant: bool) -> Any:
    """A message's content as a list of parts: a string is one input_text part (output_text with annotations for
    an assistant's), a text part of the other kind takes this role's kind."""
    kind = "output_text" if assistant else "input_text"
    if isinstance(content, str):
        content = [{"type": kind, "text": content}]
    if not isinstance(content, list):
        return content
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text"):
            part = {**part, "type": kind}
            if assistant:
                part.setdefault("annotations", [])
            else:
                part.pop("annotations", None)
                part.pop("logprobs", None)
        parts.append(part)
    return parts


def listed_item(item: Any) -> Any:
    """One input item as OpenAI's input_items lists it (item: as the request sent it, its id given)."""
    if not isinstance(item, dict):
        return item
    item = {"type": "message", **item} if "type" not in item and "role" in item else dict(item)
    if item["type"] == "message":
        item["content"] = _parts(item.get("content"), item.get("role") == "assistant")
    if item["type"] in _STATUS_TYPES and item.get("status") is None:
        item["status"] = "completed"
    return item


def _limit(query) -> int:
    text = query.get("limit")
    if text is None:
        return DEFAULT_LIMIT
    try:
        limit = int(text)
    except ValueError:
        raise InvalidRequest(f"Invalid 'limit': expected an integer, got {text!r}", param="limit",
                             code="invalid_type") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"Invalid 'limit': {limit}; it ranges between 1 and {MAX_LIMIT}", param="limit")
    return limit


def check_include(query) -> None:
    """The `include` values of a query (include[]=... as the openai SDKs send a list, or include=...) are
    OpenAI's ResponseIncludable, as on create; another is its 400."""
    for value in query.getall("include[]", []) + query.getall("include", []):
        if value not in INCLUDABLE:
            raise InvalidRequest(f"Invalid value for 'include': {value!r}; supported values are "
                                 f"{', '.join(INCLUDABLE)}", param="include")


def _position(ordered: list, item_id: str, param: str) -> int:
    for index, item in enumerate(ordered):
        if isinstance(item, dict) and item.get("id") == item_id:
            return index
    raise InvalidRequest(f"Invalid '{param}': no input item of this response has the id '{item_id}'", param=param)


def page(items: list, request: web.Request) -> dict:
    """OpenAI's `list` object of the items (oldest first) a query asks for: order, limit, after, before."""
    query = request.query
    check_include(query)
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest(f"Invalid 'order': {order!r}; it is one of asc, desc", param="order")
    limit = _limit(query)
    ordered = list(items) if order == "asc" else list(reversed(items))
    start, end = 0, len(ordered)
    if query.get("after"):
        start = _position(ordered, query["after"], "after") + 1
    if query.get("before"):
        end = _position(ordered, query["before"], "before")
    window = ordered[start:end]
    # `before` pages back: the items just before that one.
    data = window[-limit:] if query.get("before") and not query.get("after") else window[:limit]
    return {"object": "list", "data": data, "first_id": _id(data[0]) if data else None,
            "last_id": _id(data[-1]) if data else None, "has_more": len(window) > len(data)}


def _id(item: Any) -> Optional[str]:
    return item.get("id") if isinstance(item, dict) else None


def retrieve_query(request: web.Request) -> Optional[int]:
    """GET /v1/responses/{id}'s query: include as on create; None to read the response, or with stream true the
    number of the event to stream after (starting_after; -1 without it)."""
    check_include(request.query)
    if request.query.get("stream", "false").lower() in ("false", "0", ""):
        return None
    text = request.query.get("starting_after", "-1")
    try:
        return int(text)
    except ValueError:
        raise InvalidRequest(f"Invalid 'starting_after': expected an integer, got {text!r}",
                             param="starting_after", code="invalid_type") from None
