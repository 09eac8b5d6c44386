"""Gateway process: engine output -> OpenAI chat response bodies and chunks (their SSE stream: chat_stream.py; legacy
completions: completion_shape.py)."""
from __future__ import annotations

import math
import time
from typing import Optional

from gateway.engine import ChoiceResult, Delta, TokenLogprob, Usage
from gateway.llama_cpp_timings import oai_timings
from gateway.logprob_names import logprob_names
from gateway.model import ModelCard
from gateway.prompt_logprobs import vllm_prompt_logprobs
from gateway.reasoning import split_whole
from gateway.sglang_fields import cached_tokens_sglext
from gateway.stream import sse_event
from gateway.openai_usage import chat_usage
from gateway.tool_stream import CallDelta, ToolCallStream

# The headers of every stream, SSE and NDJSON: no Connection header (HTTP/1.1 keeps the connection by default, and an
# HTTP/1.0 stream must end with it); X-Accel-Buffering: no, so nginx passes each event on as it comes (llama.cpp#20872);
# no-transform, so a compressing proxy (Caddy's encode, Traefik's compress, express' compression()) does not hold
# the events in its encoder's buffer until a block fills (agentrove#869, express-sse#31).
SSE_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}


def with_sampled(entry: TokenLogprob) -> list:
    """[(token_id, logprob)] of one position: the sampled token (with its value among the top ones, if listed) first,
    then the top ones."""
    top = list(entry.top)
    return [(entry.token_id, dict(top).get(entry.token_id, entry.logprob))] + top


def chat_logprob(card: ModelCard, entry: TokenLogprob) -> dict:
    """One content entry. Its top_logprobs are vLLM's: the first N of the sampled token and then the N most likely,
    each once (serving_chat _get_top_logprobs over LogprobsProcessor._make_logprob_dict, whose dict lists the
    sampled token first), so the sampled token is always among them; when it is not one of the N most likely, the
    N-th of those is left out. The Responses API's output_text logprobs are these (vLLM's _topk_logprobs alike)."""
    def one(token_id: int, logprob: float) -> dict:
        return {"token": card.token_text(token_id), "logprob": logprob, "bytes": list(card.token_bytes(token_id))}
    top = list(dict(with_sampled(entry)).items())[:len(entry.top)]
    return {**one(entry.token_id, entry.logprob), "top_logprobs": [one(t, lp) for t, lp in top]}


def post_sampling_entry(card: ModelCard, entry: TokenLogprob) -> dict:
    """One token's probabilities after the sampler chain as llama-server writes them with post_sampling_probs
    (server-task.cpp probs_vector_to_json): id, token, bytes, prob and top_probs, a token the chain filtered out left
    out of top_probs."""
    def one(token_id: int, logprob: float) -> dict:
        return {"id": token_id, "token": card.token_text(token_id), "bytes": list(card.token_bytes(token_id)),
                "prob": math.exp(logprob)}
    return {**one(entry.token_id, entry.logprob),
            "top_probs": [one(t, lp) for t, lp in entry.top if math.isfinite(lp)]}


class ChatShaper:
    """Chat output for one request: tool-call filtering per choice, chunks, and the final message."""

    def __init__(self, plan, card: ModelCard, response_id: str, drop_cut_markup: bool = False):
        self.plan, self.card, self.id = plan, card, response_id
        # The routes whose answers carry calls as blocks or items (/v1/messages, Responses): there the markup of a call
        # max_tokens or a stop string cut is no answer text either (split).
        self.drop_cut_markup = drop_cut_markup
        self.created = int(time.time())
        self._streams: dict = {}
        self._num_calls: dict = {}   # per choice, the tool calls split began so far
        # Of the last split: call index -> the text the model wrote after that call, the end of its content (the
        # Responses API and /v1/messages place each piece after its call, in the model's order).
        self.texts_after: dict = {}
        # llama.cpp's timings (gateway/llama_cpp_timings.py): the Generation of a /v1 request, set by its route, and
        # its timings_per_token (each streamed chunk has the timings so far, not only the last).
        self.timed, self.timings_per_token = None, False
        # llama.cpp's return_progress: the role chunk carries prompt_progress (the prompt read, its time).
        self.return_progress = False

    def _stream(self, index: int, whole: bool) -> Optional[ToolCallStream]:
        if not self.plan.tools:
            return None
        if index not in self._streams:
            # Only a stream previews the calls: a whole answer (routes that build theirs from Deltas too) reads each
            # call once it is whole.
            preview = bool(getattr(self.plan, "stream", False)) and not whole
            self._streams[index] = ToolCallStream(self.plan.tools, self.plan.only_listed_tools, preview)
        return self._streams[index]

    def split(self, delta: Delta, whole: bool = False) -> tuple[str, str, Optional[list], Optional[str]]:
        """(reasoning, content, tool-call deltas, finish_reason) for one Delta. A stream's calls come as the model
        writes them (ToolCallStream: the name, then the arguments in pieces), as vLLM and OpenAI stream them; whole:
        the non-streamed answer, each call read whole at the end."""
        reasoning = "" if self.plan.hide_reasoning else delta.reasoning
        content, calls, finish, cut = delta.content, [], delta.finish_reason, False
        self.texts_after = {}
        stream = self._stream(delta.index, whole)
        if stream is not None:
            content, calls = stream.push(content)
            if finish:
                # A stop string (stop_reason: the text matched) cuts a call begun as max_tokens does.
                tail, last, cut = stream.finish(finish, isinstance(delta.stop_reason, str))
                if cut and self.drop_cut_markup and stream.filter.calls_text is not None:
                    tail = ""
                content, calls, self.texts_after = content + tail, calls + last, stream.texts_after
        if not self.plan.parallel_tool_calls:
            calls = [call for call in calls if call.index == 0]
        given = self._num_calls.get(delta.index, 0) + sum(call.id is not None for call in calls)
        self._num_calls[delta.index] = given
        if finish and given and not cut:
            finish = "function_call" if getattr(self.plan, "legacy_functions", False) else "tool_calls"
        elif finish and getattr(self.plan, "forced_tools", False):
            # A forced turn cut short (length) has no answer text: its calls, the cut one as a stream sent it.
            content = ""
        return reasoning, content, calls or None, finish

    def chat_finish(self, finish: Optional[str]) -> Optional[str]:
        """The finish_reason a chat choice reports. A named tool_choice's call finishes "stop", as OpenAI answers it
        and vLLM follows (PR #25054: "tool_calls" for auto and required, "stop" for named, streamed or not); the
        Responses API and /v1/messages read split's finish and keep their own (function_call items, tool_use)."""
        if self.plan.named_tool and finish in ("tool_calls", "function_call"):
            return "stop"
        return finish

    def call_fields(self, calls: list[CallDelta]) -> dict:
        """A message's (or delta's) calls: tool_calls, or, for the deprecated functions, OpenAI's one function_call
        ({name, arguments}: that API has one call a turn; streamed, the name first, then the arguments' pieces)."""
        if getattr(self.plan, "legacy_functions", False):
            call = calls[0]
            return {"function_call": {**({"name": call.name} if call.name is not None else {}),
                                      "arguments": call.arguments}}
        return {"tool_calls": [call.openai() for call in calls]}

    def message_calls(self, calls: list[CallDelta]) -> dict:
        """A whole message's calls (each whole: split's whole answer), without the stream's index."""
        fields = self.call_fields(calls)
        for call in fields.get("tool_calls", []):
            del call["index"]
        return fields

    def chunk(self, choices: list, usage: Optional[dict] = None, with_usage: bool = False,
              prompt_token_ids: Optional[list] = None, prompt_text: Optional[str] = None,
              sglext: Optional[dict] = None, llama: Optional[dict] = None) -> bytes:
        """One chunk; llama: llama-server's extras beside the choices (timings, prompt_progress)."""
        body = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.plan.model, "system_fingerprint": self.card.fingerprint, "choices": choices}
        if with_usage:
            body["usage"] = usage
        body.update(llama or {})
        if sglext is not None:
            body["sglext"] = sglext
        if prompt_token_ids is not None:
            body["prompt_token_ids"] = prompt_token_ids
        if prompt_text is not None:
            body["prompt_text"] = prompt_text
        return sse_event(body)

    def logprobs(self, entries: list) -> Optional[dict]:
        """Chat logprobs ({"content": [...], "refusal": None}) of the entries; None unless asked."""
        if self.plan.gen.num_logprobs is None:
            return None
        card = logprob_names(self.plan, self.card)
        entry = post_sampling_entry if self.plan.gen.sampling.post_sampling else chat_logprob
        # refusal: OpenAI's spec requires it beside content (null: this server writes no refusal tokens).
        return {"content": [entry(card, e) for e in entries], "refusal": None}

    def message(self, result: ChoiceResult) -> dict:
        """A choice's message: content, reasoning_content, tool_calls and refusal null, split as a stream."""
        reasoning, content, calls, finish = self.split(Delta(result.index, result.content, result.reasoning,
                                                             finish_reason=result.finish_reason,
                                                             stop_reason=result.stop_reason), whole=True)
        content = getattr(self.plan, "echo_prefix", "") + content
        # refusal: required (nullable) in OpenAI's spec and sent as null by OpenAI and vLLM; no answer here is one.
        message = {"role": "assistant", "content": content if (content or not calls) else None, "refusal": None}
        if getattr(self.plan, "reasoning_beside_content", False):
            # llama.cpp's deepseek-legacy: the content keeps the <think> block, reasoning_content has its text too.
            reasoning = split_whole(result.content, self.plan.gen.thinking_open)[0]
        if (self.plan.gen.split_reasoning or getattr(self.plan, "reasoning_beside_content", False)) \
                and not self.plan.hide_reasoning:
            message["reasoning_content"] = reasoning or None
            message["reasoning"] = reasoning or None
        if calls:
            message.update(self.message_calls(calls))
        choice = {"index": result.index, "message": message, "logprobs": self.logprobs(result.logprobs),
                  "finish_reason": self.chat_finish(finish), "stop_reason": result.stop_reason}
        if self.plan.return_token_ids:
            choice["token_ids"] = result.token_ids
        if self.plan.choice_prompt_ids:
            choice["prompt_token_ids"] = self.plan.gen.prompt_ids
        return choice

    def render_only(self) -> dict:
        """Ollama's /v1 answer to _debug_render_only (openai.ToChatCompletion of the object ChatHandler answers before
        it generates): the prompt the model would read in _debug_info, one empty choice, zero usage."""
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.plan.model,
                "system_fingerprint": self.card.fingerprint,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": None}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                "_debug_info": {"rendered_template": self.plan.debug_render}}

    def response(self, results: list, usage: Usage) -> dict:
        """The chat.completion body: choices, usage, and the ids and prompt text where asked."""
        body = {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.plan.model,
                "system_fingerprint": self.card.fingerprint, "choices": [self.message(r) for r in results],
                "usage": chat_usage(self.plan, usage, [r.num_reasoning_tokens for r in results])}
        if self.plan.return_token_ids:
            body["prompt_token_ids"] = self.plan.gen.prompt_ids
        if getattr(self.plan, "prompt_text", None) is not None:
            body["prompt_text"] = self.plan.prompt_text
        if self.plan.prompt.vllm_top is not None:
            # vLLM: one prompt per chat request, so its prompt logprobs sit beside the choices.
            body["prompt_logprobs"] = vllm_prompt_logprobs(self.card, results[0].prompt_logprobs or [],
                                                           self.plan.prompt.vllm_top)
        if self.plan.cached_tokens_details:
            body["sglext"] = cached_tokens_sglext(usage)
        timings = oai_timings(self.timed, usage)
        if timings is not None:
            body["timings"] = timings
        return body
