"""Gateway process: the output items of recent /v1/responses answers, kept in this gateway's memory so that a later
request's `item_reference` to one of them reads as the item itself.

The Vercel AI SDK's Responses provider, with its default `store: true`, sends an earlier turn's reasoning and text
back as `{"type": "item_reference", "id": ...}` items, as OpenAI resolves them from the responses it stored. Only
the items are kept (no response can be read back), least recently used first out, within a bound on their number and
size; a response created with `store: false` (Codex, the Agents SDK with store off) leaves nothing here. A reference
this gateway does not hold (another replica's, an item that aged out) stays unresolved: the request's 400.
"""
from __future__ import annotations

from typing import Any, Optional

import orjson

from gateway import json_out
from gateway.sized_lru import SizedLru

MAX_ITEMS = 8192
MAX_BYTES = 32 * 1024 * 1024


class ItemStore:
    """Item id -> output item, kept as its JSON (the bytes the bound counts), least recently used evicted first."""

    def __init__(self, max_items: int = MAX_ITEMS, max_bytes: int = MAX_BYTES):
        self._items = SizedLru(max_bytes, max_items)

    @property
    def num_bytes(self) -> int:
        """Bytes of the JSON of the items kept."""
        return self._items.num_bytes

    def keep(self, body: Any, items: list) -> None:
        """Keeps a finished response's output items, unless its request said store: false (OpenAI's default is true)."""
        if isinstance(body, dict) and body.get("store") is False:
            return
        for item in items:
            item_id = item.get("id")
            if isinstance(item_id, str):
                kept = json_out.dumps(item)
                self._items.put(item_id, kept, len(kept))

    def resolve(self, body: Any) -> Any:
        """The body with each item_reference of its input that names a kept item replaced by that item (a copy; the
        body itself is not changed). Others stay as they are, for the input's reader to refuse."""
        value = body.get("input") if isinstance(body, dict) else None
        if not isinstance(value, list) or not any(_is_reference(item) for item in value):
            return body
        resolved = []
        for item in value:
            kept = self._items.get(item.get("id")) if _is_reference(item) else None
            resolved.append(orjson.loads(kept) if kept is not None else item)
        return {**body, "input": resolved}

    def get(self, item_id: str) -> Optional[dict]:
        """The kept item of that id, now the most recently used; None when it is not held."""
        kept = self._items.get(item_id)
        return None if kept is None else orjson.loads(kept)

    def discard(self, item_id: str) -> None:
        """Forgets the item of that id, if held (DELETE /v1/responses/{id})."""
        self._items.drop(item_id)


def _is_reference(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "item_reference" and isinstance(item.get("id"), str)
