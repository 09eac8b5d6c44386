"""Gateway process: engine output -> a /v1/responses Response object and its stream events (one builder for both).

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
import time
from typing import Callable, Optional

from gateway.engine import Delta, Usage
from gateway.errors import ApiError
from gateway.model import ModelCard
from gateway.openai_shape import ChatShaper, chat_logprob
from gateway.text_parts import TextParts
from gateway.tool_stream import in_model_order
from gateway.reasoning import THINK_END
from gateway.responses_reasoning import encode_reasoning
from gateway.responses_request import ResponsesPlan
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


def _after_reasoning(card: ModelCard, entries: list) -> list:
    """The entries of the Delta where the answer begins, less the reasoning's: those up to </think> and the newlines
    after it (which the answer drops)."""
    texts = [card.token_text(entry.token_id) for entry in entries]
    ends = [i for i, text in enumerate(texts) if THINK_END in text]
    if not ends:
        return entries
    start = ends[-1] + 1
    while start < len(entries) and not texts[start].strip():
        start += 1
    return entries[start:]


class ResponseRun:
    """One response being built: Deltas in (through the chat route's splitting), items, events and the object out."""

    def __init__(self, plan: ResponsesPlan, card: ModelCard, on_done: Optional[Callable[[list], None]] = None):
        self.plan, self.card = plan, card
        self.on_done = on_done     # called with the output items of the finished response (ItemStore.keep)
        self.created_at = int(time.time())
        self.shaper = ChatShaper(plan.chat, card, plan.response_id, drop_cut_markup=True)
        self.output = OutputBuilder(plan.namespaces, plan.encrypted_reasoning, plan.reasoning_summary,
                                    plan.custom_tools)
        self.finish: Optional[str] = None
        self._pending: list = []   # logprobs of answer tokens whose text is still held (a tool call's start, ...)
        self._answering = False    # the answer's text began
        self.num_reasoning = 0     # thinking tokens generated (Delta.num_reasoning_tokens): usage's reasoning_tokens

    def _answer_logprobs(self, delta: Delta, content: str) -> list:
        """include message.output_text.logprobs: the logprobs of the answer's tokens, sent with the answer text they
        became (held text's with the text when it comes)."""
        if self.plan.chat.gen.num_logprobs is None or not (self._answering or delta.content):
            return []   # the reasoning's tokens are not the answer's
        entries = delta.logprobs if self._answering else _after_reasoning(self.card, delta.logprobs)
        self._answering = True
        self._pending += [chat_logprob(self.card, entry) for entry in entries]
        taken, self._pending = (self._pending, []) if content else ([], self._pending)
        return taken

    def push(self, delta: Delta) -> list:
        """The events for one Delta (only choice 0 exists: the Responses API has no n)."""
        reasoning, content, calls, finish = self.shaper.split(delta)
        self.num_reasoning = delta.num_reasoning_tokens
        logprobs = self._answer_logprobs(delta, content)
        events = self.output.reasoning(reasoning) if reasoning else []
        # Items in the model's order (text after a call comes after its item), as OpenAI orders a response's output;
        # the answer's logprobs go with its last text.
        pieces = in_model_order(content, calls or [], self.shaper.texts_after)
        last_text = max((i for i, (kind, _) in enumerate(pieces) if kind == "text"), default=-1)
        for i, (kind, piece) in enumerate(pieces):
            if kind == "call":
                events += self.output.calls([piece])
            else:
                events += self.output.answer(piece, logprobs if i == last_text else [])
        self.finish = finish or self.finish
        return events

    @property
    def status(self) -> str:
        return "incomplete" if self.finish == "length" else "completed"

    def finish_events(self, usage: Usage) -> list:
        """Closes the open item and ends with response.completed (response.incomplete when cut at the limit)."""
        events = self.output.close(self.status) + self.output.close_call(self.status)
        return events + [{"type": f"response.{self.status}", "response": self.done(usage)}]

    def done(self, usage: Usage) -> dict:
        """The finished Response object, its output items handed to on_done."""
        response = self.response(usage)
        if self.on_done is not None:
            self.on_done(response["output"])
        return response

    def failed_events(self, error: ApiError, usage: Usage) -> list:
        """A failure after the stream began: OpenAI's error event, then response.failed."""
        failed = self.response(usage, "failed")
        failed["error"] = {"code": response_error_code(error), "message": error.message}
        return [{"type": "error", "code": error.code, "message": error.message, "param": error.param},
                {"type": "response.failed", "response": failed}]

    def _usage(self, usage: Usage) -> dict:
        num_reasoning = min(self.num_reasoning, usage.completion_tokens)
        # cache_write_tokens: required by OpenAI's spec (its explicit cache writes; the prefix cache here has none).
        return {"input_tokens": usage.prompt_tokens,
                "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
                "output_tokens": usage.completion_tokens, "output_tokens_details": {"reasoning_tokens": num_reasoning},
                "total_tokens": usage.total_tokens}

    def response(self, usage: Optional[Usage], status: Optional[str] = None) -> dict:
        """The Response object; before the output (response.created), usage None and status in_progress."""
        status = status or self.status
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        return {"id": self.plan.response_id, "object": "response", "created_at": self.created_at,
                "status": status, "completed_at": int(time.time()) if status == "completed" else None,
                "background": False, "error": None, "incomplete_details": incomplete, "model": self.plan.chat.model,
                "output": list(self.output.items), "usage": None if usage is None else self._usage(usage),
                **self.plan.echo}

