"""Gateway process: stored conversations for previous_response_id: each answer's turn kept under its response id, so
that a later request continues the conversation from there (LM Studio's /api/v1/chat and OpenAI's /v1/responses).

Both APIs are stateful by default: LM Studio's /api/v1/chat (lmstudio.ai/docs/developer/rest/stateful-chats; chat.md:
`store` defaults to true, and the answer then carries `response_id`, "resp_...") and OpenAI's Responses API (`store`
defaults to true; LM Studio's /v1/responses too, docs openai-compat/responses "Stateful follow-up") continue a stored
response given as `previous_response_id`: the request sends only its new input, and the model sees the whole
conversation up to that response. Every response is such a point, so a conversation may branch. Here each turn (its
input and output, as the route's own messages or items, and for /api/v1/chat the system prompt in effect) is kept in
this gateway's memory with a link to the turn before it, in an ItemStore (bounded, least recently used out;
continuing a conversation uses every turn of it again). A request with `store: false` keeps nothing. An id this
gateway does not hold (one of `store: false`, an old one, another replica's) is a 400 naming previous_response_id
with OpenAI's code for it, previous_response_not_found, on which clients resend the whole conversation.
"""
from __future__ import annotations

import secrets
from typing import Any, Optional

from gateway.errors import InvalidRequest
from gateway.responses_items import ItemStore


class Thread:
    """The conversation a request continues: its last response id, the system prompt in effect (/api/v1/chat) and
    the earlier turns (chat messages, or Responses items)."""

    def __init__(self, parent_id: Optional[str] = None, system_prompt: Optional[str] = None,
                 messages: Optional[list] = None):
        self.parent_id, self.system_prompt, self.messages = parent_id, system_prompt, messages or []


class ResponseThreads:
    """response id -> that turn ({id, parent, system_prompt, messages}), in an ItemStore; `route` names the route
    in its errors."""

    def __init__(self, route: str, store: Optional[ItemStore] = None):
        self.route = route
        self.store = store if store is not None else ItemStore()

    def thread(self, body: Any) -> Thread:
        """The conversation the body's previous_response_id continues (an empty Thread without one); 400 naming it
        when it is no string or this gateway does not hold it, or no longer holds one of its earlier turns."""
        response_id = body.get("previous_response_id") if isinstance(body, dict) else None
        if response_id is None:
            return Thread()
        if not isinstance(response_id, str) or not response_id:
            raise InvalidRequest('"previous_response_id" must be a string', param="previous_response_id")
        turns, missing = self.turns(response_id)
        if missing is not None:
            raise InvalidRequest(self._not_held(response_id, missing), param="previous_response_id",
                                 code="previous_response_not_found")
        messages = [message for turn in turns for message in turn["messages"]]
        return Thread(response_id, turns[-1]["system_prompt"], messages)

    def turns(self, response_id: str) -> tuple[list, Optional[str]]:
        """The held turns of the conversation up to that response, oldest first, and the id of the first one no
        longer held (None when every turn is held): the turns after it only."""
        turns, turn_id = [], response_id
        while turn_id is not None:
            turn = self.store.get(turn_id)
            # The store holds /v1/conversations' conversations too (gateway.conversations): no turn.
            if turn is None or "parent" not in turn:
                return list(reversed(turns)), turn_id
            turns.append(turn)
            turn_id = turn["parent"]
        return list(reversed(turns)), None

    def drop(self, response_id: str) -> None:
        """Forgets that response's turn (DELETE /v1/responses/{id}): a later previous_response_id to it, or to a
        response after it, is the 400 of one not held."""
        self.store.discard(response_id)

    def keep(self, body: Any, thread: Thread, messages: list, system_prompt: Optional[str] = None,
             response_id: Optional[str] = None, record: Optional[dict] = None) -> Optional[str]:
        """Keeps a finished turn (its input and output `messages`) after `thread` and returns its response id (a new
        one unless given); None, nothing kept, for `store: false`. `record`: what else the route reads back of it
        (/v1/responses: the Response object, gateway.responses_store)."""
        if isinstance(body, dict) and body.get("store") is False:
            return None
        response_id = response_id or "resp_" + secrets.token_hex(24)
        turn = {"id": response_id, "parent": thread.parent_id, "system_prompt": system_prompt, "messages": messages,
                "record": record}
        self.store.keep(body, [turn])
        return response_id

    def _not_held(self, response_id: str, turn_id: str) -> str:
        """The 400's words for a previous_response_id whose conversation (or an earlier turn of it, turn_id) is not
        held."""
        where = "" if turn_id == response_id else f" (its earlier turn '{turn_id}' is no longer held)"
        return (f"Response '{response_id}' not found{where}: this server keeps the conversations of its recent "
                f"{self.route} responses in memory, not those created with store: false, older ones or another "
                f"server's. Send the whole conversation without previous_response_id instead")
