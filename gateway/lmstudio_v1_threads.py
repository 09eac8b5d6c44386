"""Gateway process: LM Studio /api/v1/chat's stored chats: each answer's turn kept under its response_id, so that a later
request's previous_response_id continues the conversation from there.

LM Studio's /api/v1/chat is stateful by default (lmstudio.ai/docs/developer/rest/stateful-chats; chat.md: `store`
defaults to true, and the answer then carries `response_id`, starting "resp_"): a request with `previous_response_id`
sends only its new input, and the model sees the whole chat up to that response. Every response is such a point, so
a chat may branch. Here each turn (its user input, its answer, and the system prompt in effect) is kept in this
gateway's memory with a link to the turn before it, within the bounds of the Responses API's item store (least
recently used out; continuing a chat uses every turn of it again). A request with `store: false` keeps nothing and
gets no response_id. An id this gateway does not hold (one of `store: false`, an old one, another replica's) is a
400 that names it.
"""
from __future__ import annotations

import secrets
from typing import Any, Optional

from gateway.errors import InvalidRequest
from gateway.responses_items import ItemStore


class Thread:
    """The chat a request continues: the system prompt in effect and the earlier turns as chat messages."""

    def __init__(self, parent_id: Optional[str] = None, system_prompt: Optional[str] = None,
                 messages: Optional[list] = None):
        self.parent_id, self.system_prompt, self.messages = parent_id, system_prompt, messages or []


class ChatThreads:
    """response_id -> that turn ({id, parent, system_prompt, messages: [user, assistant]}), in an ItemStore."""

    def __init__(self, store: Optional[ItemStore] = None):
        self.store = store if store is not None else ItemStore()

    def thread(self, body: Any) -> Thread:
        """The chat body's previous_response_id continues (an empty Thread without one); 400 naming it when it is no
        string or this gateway does not hold it, or no longer holds one of its earlier turns."""
        response_id = body.get("previous_response_id") if isinstance(body, dict) else None
        if response_id is None:
            return Thread()
        if not isinstance(response_id, str) or not response_id:
            raise InvalidRequest('"previous_response_id" must be a string', param="previous_response_id")
        turns, turn_id = [], response_id
        while turn_id is not None:
            turn = self.store.get(turn_id)
            if turn is None:
                raise InvalidRequest(_not_held(response_id, turn_id), param="previous_response_id",
                                     code="previous_response_not_found")
            turns.append(turn)
            turn_id = turn["parent"]
        messages = [message for turn in reversed(turns) for message in turn["messages"]]
        return Thread(response_id, turns[0]["system_prompt"], messages)

    def keep(self, body: Any, thread: Thread, system_prompt: Optional[str], user_content: list,
             reasoning: str, content: str) -> Optional[str]:
        """Keeps a finished answer's turn and returns its response_id; None (nothing kept) for `store: false`."""
        if isinstance(body, dict) and body.get("store") is False:
            return None
        response_id = "resp_" + secrets.token_hex(24)
        answer = {"role": "assistant", "content": content}
        if reasoning:
            answer["reasoning_content"] = reasoning
        turn = {"id": response_id, "parent": thread.parent_id, "system_prompt": system_prompt,
                "messages": [{"role": "user", "content": user_content}, answer]}
        self.store.keep(body, [turn])
        return response_id


def _not_held(response_id: str, turn_id: str) -> str:
    """The 400's words for a previous_response_id whose chat (or an earlier turn of it, turn_id) is not held."""
    where = "" if turn_id == response_id else f" (its earlier turn '{turn_id}' is no longer held)"
    return (f"Response '{response_id}' not found{where}: this server keeps the chats of its recent /api/v1/chat "
            f"responses in memory, not those created with store: false, older ones or another server's. Send the "
            f"whole conversation without previous_response_id instead")
