"""Gateway process: engine output -> Anthropic Messages content blocks, SSE events and error bodies.

One MessageBuilder per request turns the Deltas (after the /v1 tool-call parsing) into content blocks: thinking, then
text, then one tool_use block per call. The streamed answer is the events that build those blocks; the non-streamed
answer is the blocks themselves, so the two always agree."""
from __future__ import annotations

import datetime
import hashlib
import secrets
from typing import Optional

from aiohttp import web

from gateway import json_out
from gateway.anthropic_inputs import cut_input, tool_input
from gateway.engine import Delta, Usage
from gateway.errors import ApiError, ContextLengthExceeded, Overloaded
from gateway.model import ModelCard
from gateway.openai_plan import Plan
from gateway.openai_shape import SSE_HEADERS, ChatShaper
from gateway.responses_reasoning import encode_reasoning
from gateway.text_parts import TextParts
from gateway.tool_stream import CallDelta, in_model_order
from gateway.tools import dump_arguments
from gateway.web import json_response

# Anthropic's status -> error type (its "Errors" page; 503, which it does not list, as Ollama's Anthropic layer maps
# it); other 4xx are invalid_request_error, other 5xx api_error.
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error",
                529: "overloaded_error"}
# A full waiting queue is Anthropic's "API temporarily overloaded" (not an account rate limit): 529.
OVERLOADED_STATUS = 529


def _message(error: ApiError) -> str:
    """The error's message; a context overflow with known counts in Anthropic's words, which clients parse (Claude
    Code retries with a smaller max_tokens from the first form and compacts the conversation on the second)."""
    if not isinstance(error, ContextLengthExceeded) or error.ctx is None:
        return error.message
    if error.num_output is not None:
        return (f"input length and `max_tokens` exceed context limit: {error.num_prompt} + {error.num_output} > "
                f"{error.ctx}, decrease input length or `max_tokens` and try again")
    lower_bound = " (a lower bound, counted before tokenizing)" if error.at_least else ""
    return f"prompt is too long: {error.num_prompt} tokens > {error.ctx} maximum{lower_bound}"


def error_status_and_body(error: ApiError, request_id: Optional[str] = None) -> tuple[int, dict]:
    """(HTTP status, Anthropic error body) for a typed error; its `details` (error_code) where it has them; its
    request_id is req_ and the request's X-Request-Id when given (a fresh one else)."""
    status = OVERLOADED_STATUS if isinstance(error, Overloaded) else error.status
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    details = getattr(error, "details", None)
    return status, {"type": "error", "error": {"type": kind, "message": _message(error),
                                               **({"details": details} if details else {})},
                    "request_id": f"req_{request_id or secrets.token_hex(12)}"}


def is_anthropic_path(path: str) -> bool:
    """/v1/messages and everything under it answer errors in Anthropic's shape."""
    return path == "/v1/messages" or path.startswith("/v1/messages/")


def is_anthropic_request(request) -> bool:
    """A request to Anthropic's API: its paths, and with the anthropic-version header every Anthropic SDK sends,
    /v1/models (their models.list() / retrieve(), answered with Anthropic's ModelInfo) and a path no route serves
    (their Files, Skills, ... APIs: the 404; not another API's route asked with the wrong method, a 405 that keeps
    that API's key and shape): those take the key as x-api-key and get Anthropic's error shape and request-id header,
    as Anthropic's API answers them."""
    path = request.path
    if is_anthropic_path(path) or "anthropic-version" not in request.headers:
        return is_anthropic_path(path)
    unmatched = getattr(request.match_info, "http_exception", None)  # aiohttp's MatchInfoError: 404 or 405
    return path == "/v1/models" or path.startswith("/v1/models/") or getattr(unmatched, "status", None) == 404


# Anthropic's request id header, which its SDKs read (`message._request_id`, `APIStatusError.request_id`).
REQUEST_ID_HEADER = "request-id"


def anthropic_error_response(error: ApiError, request_id: Optional[str] = None) -> web.Response:
    """The error as Anthropic sends it (its Retry-After kept), the body's request_id also in its request-id header:
    req_ and `request_id` (the request's X-Request-Id, as a success's request-id is), else a fresh one."""
    status, body = error_status_and_body(error, request_id)
    return json_response(body, status=status, headers={**(error.headers or {}),
                                                       REQUEST_ID_HEADER: body["request_id"]})


def stop_reason(finish: Optional[str], matched) -> tuple[str, Optional[str]]:
    """(stop_reason, stop_sequence) for a finish_reason and the stop string it matched (vLLM's stop_reason)."""
    if finish == "tool_calls":
        return "tool_use", None
    if finish == "length":
        return "max_tokens", None
    if isinstance(matched, str):
        return "stop_sequence", matched
    return "end_turn", None


class MessageBuilder:
    """The content blocks of one assistant message, built from Deltas; each push returns the stream events
    (name, payload) that built what it added."""

    def __init__(self, plan: Plan, card: ModelCard, omit_thinking: bool = False):
        self.plan = plan
        # thinking display "omitted": thinking blocks carry "" and their signature only, as Anthropic sends them.
        self.omit_thinking = omit_thinking
        self._text = TextParts()             # the open thinking or text block's text (thinking also when omitted)
        self.id = plan.gen.req_id
        self._shaper = ChatShaper(plan, card, self.id, drop_cut_markup=True)
        self.blocks: list = []
        self._open: Optional[str] = None     # type of the last block while text may still be added to it
        self._input = TextParts()            # the open tool_use block's input JSON so far
        self.stop_reason: Optional[str] = None
        self.stop_sequence: Optional[str] = None
        self.num_thinking = 0                # thinking tokens generated (Delta.num_reasoning_tokens)

    def push(self, delta: Delta) -> list:
        """Adds one Delta: its reasoning, text and parsed calls in that order, and the stop reason on the last."""
        reasoning, content, calls, finish = self._shaper.split(delta)
        self.num_thinking = delta.num_reasoning_tokens
        # Blocks in the model's order: the text the model wrote after a call comes after its tool_use block.
        events = self._append("thinking", reasoning)
        for kind, piece in in_model_order(content, calls or [], self._shaper.texts_after):
            if kind == "text":
                events += self._append("text", piece)
            elif piece.id is None:
                events += self._tool_pieces([piece])
            else:
                events += self._tool_use(piece) if piece.done else self._tool_start(piece)
        if finish:
            events += self.close()
            self.stop_reason, self.stop_sequence = stop_reason(finish, delta.stop_reason)
        return events

    def close(self) -> list:
        """Ends the open thinking or text block: a thinking block's signature_delta, then its content_block_stop."""
        if self._open is None:
            return []
        index, events = len(self.blocks) - 1, []
        if self._open == "tool_use":
            # A call cut by max_tokens: its block ends with the input read so far.
            self.blocks[-1]["input"] = cut_input(str(self._input))
        if self._open == "text" or self._open == "thinking" and not self.omit_thinking:
            self.blocks[-1][self._open] = str(self._text)
        if self._open == "thinking":
            block = self.blocks[-1]
            block["signature"] = thinking_signature(str(self._text), self.omit_thinking)
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "signature_delta",
                                                             "signature": block["signature"]}}))
        self._open = None
        return events + [("content_block_stop", {"type": "content_block_stop", "index": index})]

    def _start(self, block: dict, empty: dict) -> list:
        events = self.close()
        self.blocks.append(block)
        start = {"type": "content_block_start", "index": len(self.blocks) - 1, "content_block": empty}
        return events + [("content_block_start", start)]

    def _append(self, kind: str, text: str) -> list:
        """Text to the open block of that kind, or to a new one (thinking then text never interleave)."""
        if not text:
            return []
        events = []
        if self._open != kind:
            # A thinking block's signature comes in a signature_delta just before its content_block_stop.
            extra = {"signature": ""} if kind == "thinking" else {}
            events = self._start({"type": kind, kind: "", **extra}, {"type": kind, kind: "", **extra})
            self._open, self._text = kind, TextParts()
        # The block's text is set when it closes.
        self._text.add(text)
        if kind == "thinking" and self.omit_thinking:
            return events
        delta = {"type": f"{kind}_delta", kind: text}
        return events + [("content_block_delta", {"type": "content_block_delta", "index": len(self.blocks) - 1,
                                                  "delta": delta})]

    def _tool_use(self, call: CallDelta) -> list:
        """A whole tool_use block: its input in one JSON delta."""
        tool_id = "toolu_" + call.id.removeprefix("call_")
        value = tool_input(call.arguments)
        events = self._start({"type": "tool_use", "id": tool_id, "name": call.name, "input": value},
                             {"type": "tool_use", "id": tool_id, "name": call.name, "input": {}})
        index = len(self.blocks) - 1
        delta = {"type": "input_json_delta", "partial_json": dump_arguments(value)}
        return events + [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
                         ("content_block_stop", {"type": "content_block_stop", "index": index})]

    def _tool_start(self, call: CallDelta) -> list:
        """A tool_use block the model is writing: its start (input {}), then its input in pieces, as Anthropic
        streams input_json_delta events; the block's input is what they join to."""
        tool_id = "toolu_" + call.id.removeprefix("call_")
        block = {"type": "tool_use", "id": tool_id, "name": call.name, "input": {}}
        events = self._start(block, dict(block))
        self._open, self._input = "tool_use", TextParts()
        return events + self._tool_pieces([call])

    def _tool_pieces(self, calls: list) -> list:
        events = []
        for call in calls if self._open == "tool_use" else []:
            if call.arguments:
                self._input.add(call.arguments)
                delta = {"type": "input_json_delta", "partial_json": call.arguments}
                events.append(("content_block_delta", {"type": "content_block_delta", "index": len(self.blocks) - 1,
                                                       "delta": delta}))
            if call.done:
                events += self.close()
        return events

    def message(self, usage: Usage, content: Optional[list] = None) -> dict:
        """The message object: whole (non-streamed) or, with content=[], as message_start announces it (nothing
        generated yet)."""
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.plan.model,
                "content": self.blocks if content is None else content, "stop_reason": self.stop_reason,
                "stop_sequence": self.stop_sequence,
                "usage": usage_dict(usage, self.num_thinking if content is None else 0)}


def model_info(name: str, created: int, max_context_len: int) -> dict:
    """The fields of Anthropic's ModelInfo (GET /v1/models as Anthropic answers it), which the Anthropic SDKs type as
    always there (display_name a string, created_at an RFC 3339 time, lifecycle one of active / deprecated / retired),
    and its limits (max_input_tokens, the largest max_tokens), each the context here, as the prompt and the output
    share it: added to a model object for a client that sends the anthropic-version header, as those SDKs do."""
    created_at = datetime.datetime.fromtimestamp(created, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": "model", "display_name": name, "created_at": created_at, "lifecycle": "active",
            "max_input_tokens": max_context_len, "max_tokens": max_context_len}


def thinking_signature(thinking: str, omitted: bool = False) -> str:
    """A thinking block's signature, never empty (clients drop or refuse thinking blocks signed with ""): a digest of
    the text, unchecked when the block comes back; with display "omitted" (a block without its text) the text itself,
    encoded (responses_reasoning), which anthropic_request reads back, for Anthropic's "multi-turn continuity"."""
    return encode_reasoning(thinking) if omitted else "sig_" + hashlib.sha256(thinking.encode()).hexdigest()


def usage_dict(usage: Usage, num_thinking: int = 0) -> dict:
    """Anthropic's usage: prefix-cache hits are cache reads, not input (input + cache reads + cache writes = the
    prompt, as Anthropic counts it and vLLM maps it); nothing is written to a cache on request, so writes are 0.
    output_tokens_details.thinking_tokens: how many of output_tokens were thinking, as Anthropic reports it (the SDKs'
    OutputTokensDetails; the Vercel AI SDK and LiteLLM read it as the reasoning tokens), counted as /v1's
    reasoning_tokens is (Anthropic counts the block's delimiters too: a token or two more)."""
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    return {"input_tokens": usage.prompt_tokens - cached, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached, "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"thinking_tokens": num_thinking}}


def sse(name: str, payload: dict) -> bytes:
    """One Anthropic SSE event: the `event:` line names the payload's type, as Anthropic sends it."""
    return b"event: " + name.encode() + b"\ndata: " + json_out.event_dumps(payload) + b"\n\n"


class AnthropicFramer:
    """Anthropic's stream: message_start, the content block events, message_delta (stop reason and usage),
    message_stop; ping events keep a silent stream alive; a failure after the headers is an error event."""
    content_type = "text/event-stream; charset=utf-8"
    headers = SSE_HEADERS

    def __init__(self, builder: MessageBuilder):
        self.builder = builder

    def start(self, usage: Usage) -> list[bytes]:
        """message_start with the message so far: no content, the prompt's input tokens, 0 output."""
        message = self.builder.message(Usage(usage.prompt_tokens, 0, usage.cached_tokens), content=[])
        return [sse("message_start", {"type": "message_start", "message": message})]

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """The content-block events of one Delta (content_block_start / _delta / _stop for thinking, text and
        tool_use)."""
        return [sse(name, payload) for name, payload in self.builder.push(delta)]

    def end(self, usage: Usage) -> list[bytes]:
        """The open blocks closed, message_delta with stop_reason, stop_sequence and the final usage, then
        message_stop."""
        b = self.builder
        frames = [sse(name, payload) for name, payload in b.close()]
        message_delta = {"type": "message_delta", "delta": {"stop_reason": b.stop_reason,
                                                            "stop_sequence": b.stop_sequence},
                         "usage": usage_dict(usage, b.num_thinking)}
        return frames + [sse("message_delta", message_delta), sse("message_stop", {"type": "message_stop"})]

    def error(self, error: ApiError, usage: Usage) -> list[bytes]:
        """An `error` event with Anthropic's error object ({"type": "error", "error": {type, message}})."""
        _, body = error_status_and_body(error)
        return [sse("error", {"type": "error", "error": body["error"]})]

    def keepalive(self) -> bytes:
        """Anthropic's `ping` event."""
        return sse("ping", {"type": "ping"})
