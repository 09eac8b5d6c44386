"""Gateway process: engine output -> a /v1/responses Response's output items and their stream events (one builder for
both; the request's run, which feeds it: gateway/responses_run.py).

The chat route's ChatShaper splits each Delta into reasoning, text and tool calls (its tool-call parsing included);
OutputBuilder turns those pieces into output items, as vLLM does for models with a reasoning parser: a reasoning
item (content [reasoning_text], summary []), then message items (one output_text part each) and one function_call
item per call in the order the model wrote them. Each step also returns the semantic events that build the items, so
a streamed response and a non-streamed one are the same items by construction. When the request asks for a reasoning
summary, the reasoning item's summary is its whole text (one summary_text part, streamed with the
reasoning_summary_* events), as Ollama's /v1/responses gives the thinking: the clients that show a Responses model's
reasoning read the summary.
"""
from __future__ import annotations

import secrets
from typing import Optional

from gateway.errors import ApiError
from gateway.text_parts import TextParts
from gateway.responses_reasoning import encode_reasoning
from gateway.responses_tools import custom_call_added, custom_call_done, whole_object

_PARTS = {"reasoning": "reasoning_text", "message": "output_text"}


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


def _part(kind: str, text: str, logprobs: Optional[list] = None) -> dict:
    if kind == "reasoning":
        return {"type": "reasoning_text", "text": text}
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}


def _summary_part(text: str) -> dict:
    return {"type": "summary_text", "text": text}


def _item(kind: str, item_id: str, text: Optional[str], status: str, logprobs: Optional[list] = None,
          encrypted: bool = False, summary: bool = False) -> dict:
    """A reasoning or message item; text None: just opened (no content part yet). encrypted: a finished reasoning
    item also carries its text in encrypted_content (include reasoning.encrypted_content); summary: and in its
    summary (a reasoning summary was asked for)."""
    content = [] if text is None else [_part(kind, text, logprobs)]
    if kind == "reasoning":
        kept = encode_reasoning(text) if encrypted and text is not None else None
        summaries = [_summary_part(text)] if summary and text is not None else []
        return {"id": item_id, "type": "reasoning", "summary": summaries, "content": content,
                "encrypted_content": kept, "status": status}
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def _without_bytes(logprobs: list) -> list:
    return [{"token": e["token"], "logprob": e["logprob"],
             "top_logprobs": [{"token": t["token"], "logprob": t["logprob"]} for t in e["top_logprobs"]]}
            for e in logprobs]


def response_error_code(error: ApiError) -> str:
    """A failed Response's error.code: one of OpenAI's ResponseErrorCode values, which typed clients read as a closed
    enum (the error event before it keeps the server's own code)."""
    if error.status == 429:
        return "rate_limit_exceeded"
    return "invalid_prompt" if 400 <= error.status < 500 else "server_error"


class OutputBuilder:
    """The output items of one response, built from reasoning text, answer text and tool calls as they come."""

    def __init__(self, namespaces: Optional[dict] = None, encrypted_reasoning: bool = False,
                 reasoning_summary: bool = False, custom_tools: Optional[set] = None):
        self.namespaces = namespaces or {}   # {flat name: (namespace, name)} of the namespaced functions offered
        self.custom_tools = custom_tools or set()   # the custom tools' names: their calls are custom_tool_call
        self.encrypted_reasoning = encrypted_reasoning
        self.reasoning_summary = reasoning_summary
        self.items: list = []
        self._open: Optional[str] = None    # "reasoning" or "message" while that item takes text
        self._open_id = ""
        self._text = TextParts()
        self._logprobs: list = []
        self._call: Optional[dict] = None   # the function_call item being written
        self._call_arguments = TextParts()  # its arguments so far (set in it when it closes)

    def _where(self) -> dict:
        return {"item_id": self._open_id, "output_index": len(self.items), "content_index": 0}

    def _start(self, kind: str) -> list:
        if self._open == kind:
            return []
        events = self.close("completed")
        self._open, self._open_id, self._text = kind, _new_id("rs" if kind == "reasoning" else "msg"), TextParts()
        self._logprobs = []
        where = self._where()
        events += [{"type": "response.output_item.added", "output_index": where["output_index"],
                    "item": _item(kind, self._open_id, None, "in_progress")},
                   {"type": "response.content_part.added", **where, "part": _part(kind, "")}]
        if kind == "reasoning" and self.reasoning_summary:
            events.append({"type": "response.reasoning_summary_part.added", **self._summary_where(),
                           "part": _summary_part("")})
        return events

    def _summary_where(self) -> dict:
        return {"item_id": self._open_id, "output_index": len(self.items), "summary_index": 0}

    def reasoning(self, text: str) -> list:
        """The events of a reasoning text piece (its item started first)."""
        events = self._start("reasoning")
        self._text.add(text)
        events.append({"type": "response.reasoning_text.delta", **self._where(), "delta": text})
        if self.reasoning_summary:
            events.append({"type": "response.reasoning_summary_text.delta", **self._summary_where(), "delta": text})
        return events

    def answer(self, text: str, logprobs: Optional[list] = None) -> list:
        """Answer text, with the logprobs of its tokens (output_text's: token, bytes, logprob, top_logprobs; the
        events' leave bytes out, as OpenAI's event types do)."""
        events = self._start("message")
        self._text.add(text)
        self._logprobs += logprobs or []
        return events + [{"type": "response.output_text.delta", **self._where(), "delta": text,
                          "logprobs": _without_bytes(logprobs or [])}]

    def calls(self, calls: list) -> list:
        """The function_call items of the chat's call pieces: a call's item opens with its name, takes its arguments'
        pieces as function_call_arguments.delta events and is done with its last (a call read whole: all at once)."""
        events = []
        for call in calls:
            if call.id is not None:
                events += self._call_start(call)
            if self._call is None:
                continue
            if call.arguments:
                self._call_arguments.add(call.arguments)
                events += [] if self._call["type"] == "custom_tool_call" else [
                    {"type": "response.function_call_arguments.delta", **self._call_where(), "delta": call.arguments}]
            if call.done:
                # The item's arguments are the one object the whole output reads (a parameter the model gave twice
                # streamed both keys), as the unstreamed item has them.
                if call.whole is not None:
                    self._call_arguments = TextParts(call.whole)
                events += self.close_call("completed")
        return events

    def _call_start(self, call) -> list:
        events = self.close("completed") + self.close_call("completed")
        custom = call.name in self.custom_tools
        item = {"id": _new_id("ctc" if custom else "fc"), "type": "custom_tool_call" if custom else "function_call",
                "call_id": call.id, "name": call.name, "arguments": "", "status": "in_progress"}
        if call.name in self.namespaces:
            item["namespace"], item["name"] = self.namespaces[call.name]
        self._call, self._call_arguments = item, TextParts()
        added = custom_call_added(item) if custom else dict(item)
        return events + [{"type": "response.output_item.added", "output_index": len(self.items), "item": added}]

    def _call_where(self) -> dict:
        return {"item_id": self._call["id"], "output_index": len(self.items)}

    def close_call(self, status: str) -> list:
        """Finishes the open function_call item (incomplete: max_output_tokens or a stop string cut its arguments,
        which then read as no JSON object)."""
        if self._call is None:
            return []
        self._call["arguments"] = str(self._call_arguments)
        if not whole_object(self._call["arguments"]):
            status = "incomplete"
        item, where = {**self._call, "status": status}, self._call_where()
        self._call = None
        if item["type"] == "custom_tool_call":
            item, events = custom_call_done(item, where)
        else:
            events = [{"type": "response.function_call_arguments.done", **where, "name": item["name"],
                       "arguments": item["arguments"]}]
        self.items.append(item)
        return events + [{"type": "response.output_item.done", "output_index": where["output_index"], "item": item}]

    def snapshot(self) -> list:
        """The output items so far with the open one as it stands (in_progress): a response read while it runs."""
        items = list(self.items)
        if self._open is not None:
            items.append(_item(self._open, self._open_id, str(self._text), "in_progress", self._logprobs))
        if self._call is not None:
            items.append({**self._call, "arguments": str(self._call_arguments)})
        return items

    def close(self, status: str) -> list:
        """Finishes the open reasoning or message item (status completed, or incomplete when cut short)."""
        if self._open is None:
            return []
        kind, where, text, logprobs = self._open, self._where(), str(self._text), self._logprobs
        summary = kind == "reasoning" and self.reasoning_summary
        summary_where = self._summary_where()
        item = _item(kind, self._open_id, text, status, logprobs, self.encrypted_reasoning, summary)
        self.items.append(item)
        self._open = None
        done = "response.reasoning_text.done" if kind == "reasoning" else "response.output_text.done"
        text_done = {"type": done, **where, "text": text,
                     **({"logprobs": _without_bytes(logprobs)} if kind == "message" else {})}
        events = [text_done, {"type": "response.content_part.done", **where, "part": _part(kind, text, logprobs)}]
        if summary:
            events += [{"type": "response.reasoning_summary_text.done", **summary_where, "text": text},
                       {"type": "response.reasoning_summary_part.done", **summary_where, "part": _summary_part(text)}]
        return events + [{"type": "response.output_item.done", "output_index": where["output_index"], "item": item}]
