"""Gateway process: one /v1/responses request's run: the engine's Deltas through ChatShaper's split into
OutputBuilder's items and events (gateway/responses_shape.py), and the Response object they make."""
from __future__ import annotations

import time
from typing import Optional

from gateway.engine import Delta, Usage
from gateway.errors import ApiError
from gateway.model import ModelCard
from gateway.openai_shape import ChatShaper, chat_logprob
from gateway.tool_stream import in_model_order
from gateway.reasoning import THINK_END
from gateway.responses_request import ResponsesPlan
from gateway.responses_shape import OutputBuilder, response_error_code


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

    def __init__(self, plan: ResponsesPlan, card: ModelCard):
        self.plan, self.card = plan, card
        self.final: Optional[dict] = None   # the Response object once it ended (completed, incomplete or failed)
        self.cancelled = False     # a background response cancelled (POST /v1/responses/{id}/cancel)
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
        """incomplete when cut at the limit, cancelled when a background response was cancelled, completed
        otherwise."""
        if self.cancelled:
            return "cancelled"
        return "incomplete" if self.finish == "length" else "completed"

    @property
    def item_status(self) -> str:
        """The open items' status at the end: an item has no cancelled status (OpenAI's ResponseOutputMessage)."""
        return "completed" if self.status == "completed" else "incomplete"

    def finish_events(self, usage: Usage) -> list:
        """Closes the open item and ends with response.completed (response.incomplete when cut at the limit; a
        cancelled one's last event is response.completed with status cancelled: OpenAI's stream events have no
        response.cancelled)."""
        events = self.output.close(self.item_status) + self.output.close_call(self.item_status)
        kind = "incomplete" if self.status == "incomplete" else "completed"
        return events + [{"type": f"response.{kind}", "response": self.done(usage)}]

    def done(self, usage: Usage) -> dict:
        """The finished Response object (kept as `final`)."""
        self.final = self.response(usage)
        return self.final

    def failed_events(self, error: ApiError, usage: Usage) -> list:
        """A failure after the stream began: OpenAI's error event, then response.failed."""
        failed = self.response(usage, "failed")
        failed["error"] = {"code": response_error_code(error), "message": error.message}
        self.final = failed
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
                "error": None, "incomplete_details": incomplete, "model": self.plan.chat.model,
                "output": list(self.output.items), "usage": None if usage is None else self._usage(usage),
                **self.plan.echo}

