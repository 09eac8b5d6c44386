"""Gateway process: engine output -> Ollama response objects (NDJSON lines, final metrics); the model entries of
/api/tags and /api/ps are in gateway/ollama_models.py."""
from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Optional

import orjson

from gateway import json_out
from gateway.engine import Delta, TokenLogprob, Usage
from gateway.model import ModelCard
from gateway.ollama_models import created_at
from gateway.ollama_request import OllamaPlan
from gateway.ollama_thinking import AnswerStart, ThinkingTrim
from gateway.text_parts import TextParts
from gateway.tool_filter import ToolCallFilter

# The Ollama server version we answer /api/version with (the API surface we follow).
OLLAMA_VERSION = "0.33.3"
NDJSON_CONTENT_TYPE = "application/x-ndjson"


def ndjson_line(body: dict) -> bytes:
    """One NDJSON line: the body as compact JSON and a newline."""
    return json_out.dumps(body) + b"\n"


def durations_ns(received: float, started: float, first_token: Optional[float], finished: float,
                 done: float, queued: float = 0.0) -> dict:
    """Ollama's nanosecond timings from monotonic seconds; each positive, and the parts never exceed the total.

    load = request arrival -> submitted (templating, tokenizing; the model is always loaded),
    prompt_eval = submitted -> first token, less the `queued` seconds the scheduler kept it waiting for a seat (in
    Ollama that wait is in total_duration only: a short prompt queued 6 s read as 1.8 prompt tokens a second),
    eval = first token -> last token.
    """
    first = finished if first_token is None else min(max(first_token, started), finished)
    load = max(1, round((started - received) * 1e9))
    prompt_eval = max(1, round((first - started - min(max(queued, 0.0), first - started)) * 1e9))
    evaluation = max(1, round((finished - first) * 1e9))
    total = max(round((done - received) * 1e9), load + prompt_eval + evaluation)
    return {"total_duration": total, "load_duration": load, "prompt_eval_duration": prompt_eval,
            "eval_duration": evaluation}


def final_metrics(usage: Usage, durations: dict) -> dict:
    """The metric fields of a done:true object, in Ollama's order. prompt_eval_count is the whole prompt (Ollama's
    llama-server runner reports cache_n + prompt_n) and prompt_eval_cached_count the part the prefix cache served
    (Ollama's api.Metrics.PromptEvalCachedCount, from llama-server's cache_n)."""
    return {"total_duration": durations["total_duration"], "load_duration": durations["load_duration"],
            "prompt_eval_count": usage.prompt_tokens,
            "prompt_eval_cached_count": min(usage.cached_tokens, usage.prompt_tokens),
            "prompt_eval_duration": durations["prompt_eval_duration"],
            "eval_count": usage.completion_tokens, "eval_duration": durations["eval_duration"]}


def done_reason(finish_reason: Optional[str]) -> str:
    """Ollama's done_reason of a finish reason: "length" for length, "stop" for every other end."""
    return "length" if finish_reason == "length" else "stop"


def ollama_tool_calls(calls: list, first_index: int = 0) -> list:
    """OpenAI tool calls (arguments as a JSON string) -> Ollama's (arguments as an object, index in function: the
    call's place in the answer, counted from first_index)."""
    out = []
    for index, call in enumerate(calls, first_index):
        function = call["function"]
        arguments = function["arguments"]
        if isinstance(arguments, str):
            try:
                arguments = orjson.loads(arguments)
            except orjson.JSONDecodeError:
                arguments = {}
        out.append({"id": call.get("id") or f"call_{secrets.token_hex(12)}",
                    "function": {"index": index, "name": function["name"], "arguments": arguments}})
    return out


@dataclass
class Piece:
    """One Ollama chunk's worth of output."""
    content: str = ""
    thinking: str = ""
    tool_calls: Optional[list] = None
    logprobs: list = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Nothing to send: no content, thinking, tool calls or logprobs."""
        return not (self.content or self.thinking or self.tool_calls or self.logprobs)


class OllamaOutput:
    """Per-request output state shared by streamed and non-streamed answers (so both give the same text)."""

    def __init__(self, plan: OllamaPlan, card: ModelCard):
        self.plan, self.card = plan, card
        self._filter = ToolCallFilter(plan.tools) if plan.tools else None
        self.output_ids: list = []
        self.finish_reason: Optional[str] = None
        self.stop_string: Optional[str] = None   # the options.stop string that ended the output
        self._answer = TextParts()                # the answer's text (not the thinking) as generated
        self._num_calls = 0                       # tool calls given so far (each is sent as soon as it is whole)
        self._thinking = ThinkingTrim(trim_end=not plan.raw)
        self._answer_start = AnswerStart(plan.gen.thinking_open) if plan.gen.split_reasoning else None

    def _logprob(self, entry: TokenLogprob) -> dict:
        def one(token_id: int, logprob: float) -> dict:
            return {"token": self.card.token_text(token_id), "logprob": logprob,
                    "bytes": list(self.card.token_bytes(token_id))}
        logprob = one(entry.token_id, entry.logprob)
        # Ollama leaves top_logprobs out when none were asked for (omitempty).
        if entry.top:
            logprob["top_logprobs"] = [one(t, lp) for t, lp in entry.top]
        return logprob

    def push(self, delta: Delta) -> Piece:
        """The Piece of one Delta: its content and thinking, the tool calls it completed and its logprobs in Ollama's
        shape."""
        self.output_ids.extend(entry.token_id for entry in delta.logprobs)
        self._answer.add(delta.content)
        content = delta.content
        if self._answer_start is not None:
            content = self._answer_start.push(content, delta.reasoning)
        piece = Piece(content=content, thinking=delta.reasoning)
        if self.plan.want_logprobs:
            piece.logprobs = [self._logprob(entry) for entry in delta.logprobs]
        if self._filter is not None:
            piece.content = self._filter.push(piece.content)
            calls = self._filter.take_ready()
            if delta.finish_reason:
                tail, last = self._filter.finish(delta.finish_reason, isinstance(delta.stop_reason, str), True)
                piece.content += tail
                calls += last or []
            piece.tool_calls = ollama_tool_calls(calls, self._num_calls) if calls else None
            self._num_calls += len(calls)
        piece.thinking = self._thinking.push(piece.thinking, bool(delta.content or piece.tool_calls
                                                                 or delta.finish_reason))
        if delta.finish_reason:
            self.finish_reason = delta.finish_reason
            self.stop_string = delta.stop_reason if isinstance(delta.stop_reason, str) else None
        return piece

    def context(self) -> list:
        """The prompt's ids and the output's, as Ollama builds `context` (the prompt and the generated text, the stop
        string that ended it left out, as in the answer): a continuation starts where the answer ended."""
        ids = self.output_ids
        if self.stop_string is None:
            return list(self.plan.gen.prompt_ids) + ids
        text = self.card.decode(ids)
        start = text.find(self.stop_string, _answer_end(text, str(self._answer), self.plan.gen.split_reasoning))
        return list(self.plan.gen.prompt_ids) + (_ids_before(self.card, ids, text[:start]) if start >= 0 else ids)


def _answer_end(text: str, answer: str, split: bool) -> int:
    """Where the answer ends in the output's text, which is where the stop string that ended it begins: stop strings
    are looked for in the answer only, after the thinking's </think> (the answer's leading blank lines dropped)."""
    close = text.find("</think>") if split else -1
    begin = close + len("</think>") if close >= 0 else 0
    at = text.find(answer, begin) if answer else -1
    return at + len(answer) if at >= 0 else begin


def _ids_before(card: ModelCard, ids: list, kept: str) -> list:
    """ids cut to the text `kept` (a prefix of theirs): the longest prefix of ids whose text is a prefix of it, and
    the ids of the rest (a token that straddles the cut is cut, as Ollama's tokenizing of the kept text cuts it)."""
    size = len(ids)
    while size and not kept.startswith(card.decode(ids[:size])):
        size -= 1
    return ids[:size] + card.encode(kept[len(card.decode(ids[:size])):])


def chat_message(piece: Piece) -> dict:
    """The assistant message of an /api/chat line: role, content, and thinking and tool_calls when the piece has
    them."""
    message = {"role": "assistant", "content": piece.content}
    if piece.thinking:
        message["thinking"] = piece.thinking
    if piece.tool_calls:
        message["tool_calls"] = piece.tool_calls
    return message


def chunk(plan: OllamaPlan, chat: bool, piece: Piece, stamp: str) -> dict:
    """A done:false object carrying one piece (chat: message; generate: response/thinking)."""
    body = {"model": plan.model, "created_at": stamp}
    if chat:
        body["message"] = chat_message(piece)
    else:
        body["response"] = piece.content
        if piece.thinking:
            body["thinking"] = piece.thinking
    body["done"] = False
    if piece.logprobs:
        body["logprobs"] = piece.logprobs
    return body


def final(plan: OllamaPlan, chat: bool, piece: Piece, out: OllamaOutput, metrics: dict, stamp: str) -> dict:
    """The done:true object: the last piece (empty when streamed), done_reason, context, metrics."""
    body = chunk(plan, chat, piece, stamp)
    body["done"] = True
    body["done_reason"] = done_reason(out.finish_reason)
    logprobs = body.pop("logprobs", None)
    if plan.return_context and not chat:
        body["context"] = out.context()
    body.update(metrics)
    if logprobs:
        body["logprobs"] = logprobs
    return body


def load_response(plan: OllamaPlan, chat: bool) -> dict:
    """Ollama's answer to an empty prompt / no messages: the model is (already) loaded, or 'unloaded'."""
    body = {"model": plan.model, "created_at": created_at()}
    if chat:
        body["message"] = {"role": "assistant", "content": ""}
    else:
        body["response"] = ""
    body.update(done=True, done_reason="unload" if plan.unload else "load")
    return body
