"""Gateway process: engine output -> legacy /v1/completions response bodies and SSE chunks."""
from __future__ import annotations

import time
from typing import Optional

from gateway.engine import Delta, TokenLogprob, Usage
from gateway.llama_cpp_timings import oai_timings, prompt_progress
from gateway.logprob_names import logprob_names
from gateway.model import ModelCard
from gateway.openai_shape import SSE_HEADERS, with_sampled
from gateway.openai_usage import choice_usage, usage_dict
from gateway.prompt_logprobs import completion_choice_extras, echo_legacy_logprobs, legacy_top, prompt_only_result
from gateway.sglang_fields import cached_tokens_sglext
from gateway.stream import SSE_DONE, SseFramer, TextOffsets, sse_event


def text_offsets(plan, card: ModelCard, start: int = 0) -> TextOffsets:
    """text_offset counting for one choice's output: its special tokens add text only with skip_special_tokens false."""
    skip = plan.gen.skip_special_tokens
    return TextOffsets(lambda token_id: card.text_bytes(token_id, skip), start)


def completion_logprobs(card: ModelCard, entries: list, offsets: TextOffsets) -> dict:
    """Legacy completions logprobs: tokens, token_logprobs, top_logprobs, text_offset (offsets: the choice's so far).
    Tokens are named by card.legacy_token, each top_logprobs key names one token id (legacy_top). Each position's
    top_logprobs holds the sampled token first, then the k most likely: k + 1 entries when it is not among them, as
    OpenAI and vLLM answer."""
    return {"tokens": [card.legacy_token(e.token_id) for e in entries], "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [legacy_top(card, e.token_id, with_sampled(e)) for e in entries],
            "text_offset": offsets.push([e.token_id for e in entries])}


class CompletionFramer(SseFramer):
    """SSE framing of a legacy completions stream (text chunks, finish chunk, usage chunk, [DONE])."""
    content_type = "text/event-stream; charset=utf-8"
    headers = SSE_HEADERS

    def __init__(self, plan, card: ModelCard, response_id: str):
        self.p, self.card, self.id = plan, card, response_id
        self.created = int(time.time())
        self._offsets: dict = {}
        self._named: set = set()   # return_token_ids: choices whose prompt_token_ids went out (on their first chunk)
        # llama.cpp's timings (gateway/llama_cpp_timings.py): the Generation of a /v1 request, set by its route, and
        # its timings_per_token (each streamed chunk has the timings so far, not only the last).
        self.timed, self.timings_per_token = None, False
        self.return_progress = False   # llama.cpp's: a chunk with each prompt's prompt_progress before its text

    def _chunk(self, choices: list, usage: Optional[Usage], num_tokens: int = 0, extra: Optional[dict] = None) -> bytes:
        """One choice's chunk; num_tokens: what that choice generated up to it (its continuous usage); extra: fields
        beside the choices (llama.cpp's prompt_progress)."""
        if self.p.return_token_ids:
            for choice in choices:
                choice.setdefault("token_ids", [])   # an echo chunk: no generated ids
                if choice["index"] not in self._named:
                    self._named.add(choice["index"])
                    choice["prompt_token_ids"] = self.p.gen.all_prompt_ids[choice["index"] // self.p.gen.n]
        body = {"id": self.id, "object": "text_completion", "created": self.created, "model": self.p.model,
                "system_fingerprint": self.card.fingerprint, "choices": choices, **(extra or {})}
        if self.p.include_usage and usage is not None and self.p.continuous_usage:
            index = choices[0]["index"]
            body["usage"] = usage_dict(choice_usage(usage, index // self.p.gen.n, num_tokens))
        elif self.p.include_usage:
            body["usage"] = None
        # A finish chunk is the stream's last but for [DONE] unless a usage chunk follows: llama-server's timings, on
        # every chunk with timings_per_token.
        finish = choices[0].get("finish_reason") is not None
        timings = (oai_timings(self.timed, usage, num_tokens)
                   if self.timings_per_token and not finish or finish and not self.p.include_usage else None)
        return sse_event(body if timings is None else {**body, "timings": timings})

    def start(self, usage: Usage) -> list[bytes]:
        """With return_progress, each choice's prompt_progress chunk; with echo, each choice's prompt chunk (held back
        to the first Delta when echo asks for prompt logprobs)."""
        frames = [self._chunk([{"index": i, "text": "", "logprobs": None, "finish_reason": None, "stop_reason": None}],
                              usage,
                              extra={"prompt_progress": prompt_progress(self.timed, usage, i // self.p.gen.n)})
                  for i in range(self.p.gen.num_choices if self.return_progress and self.timed is not None else 0)]
        # Echo + logprobs: each choice's prompt chunk waits for its prompt logprobs (its first Delta).
        if self.p.prompt.echo_top is not None:
            return frames
        count = self.p.gen.num_choices if self.p.echo_texts else 0
        return frames + [self._echo(index, None, usage) for index in range(count)]

    def usage_body(self, usage: Usage) -> dict:
        """The `usage` object of a completions chunk."""
        return usage_dict(usage)

    def _echo(self, index: int, logprobs: Optional[dict], usage: Usage) -> bytes:
        text = self.p.echo_texts[index // self.p.gen.n]
        self._offsets[index] = text_offsets(self.p, self.card, len(text))
        return self._chunk([{"index": index, "text": text, "logprobs": logprobs, "finish_reason": None,
                             "stop_reason": None}], usage)

    def _echo_with_logprobs(self, delta: Delta, usage: Usage) -> bytes:
        prompt_ids = self.p.gen.all_prompt_ids[delta.index // self.p.gen.n]
        logprobs = echo_legacy_logprobs(logprob_names(self.p, self.card), prompt_ids, delta.prompt_logprobs,
                                        self.p.prompt.echo_top, self.p.echo_texts[delta.index // self.p.gen.n])
        return self._echo(delta.index, logprobs, usage)

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """The text chunk of one Delta, preceded by the echoed prompt with its logprobs on a choice's first Delta; a
        prompt-only request (max_tokens 0) sends only the finish, as length."""
        usage = self._usage(usage)
        frames = []
        if self.p.prompt.echo_top is not None and delta.prompt_logprobs is not None:
            frames.append(self._echo_with_logprobs(delta, usage))
        if self.p.prompt.prompt_only:
            if not delta.finish_reason:
                return frames
            delta = Delta(delta.index, finish_reason="length")
        return frames + self._text(delta, usage)

    def _usage(self, usage: Usage) -> Usage:
        """Usage as the client sees it: max_tokens 0 + echo generated one token that is dropped."""
        return Usage(usage.prompt_tokens, 0, usage.cached_tokens) if self.p.prompt.prompt_only else usage

    def _text(self, delta: Delta, usage: Usage) -> list[bytes]:
        offsets = self._offsets.setdefault(delta.index, text_offsets(self.p, self.card))
        logprobs = (completion_logprobs(logprob_names(self.p, self.card), delta.logprobs, offsets)
                    if self.p.gen.num_logprobs is not None else None)
        # vLLM's CompletionResponseStreamChoice sets stop_reason on every chunk: null until the choice's last.
        choice = {"index": delta.index, "text": delta.content, "logprobs": logprobs,
                  "finish_reason": delta.finish_reason, "stop_reason": delta.stop_reason}
        if self.p.return_token_ids:
            choice["token_ids"] = delta.token_ids
        # max_tokens 0 + echo: the one token generated is dropped, and not counted.
        return [self._chunk([choice], usage, 0 if self.p.prompt.prompt_only else delta.num_tokens)]

    def end(self, usage: Usage) -> list[bytes]:
        """SGLang's cached-tokens chunk when asked, the usage chunk (choices []) with llama.cpp timings when
        include_usage, then [DONE]."""
        usage = self._usage(usage)
        head = {"id": self.id, "object": "text_completion", "created": self.created, "model": self.p.model,
                "system_fingerprint": self.card.fingerprint, "choices": []}
        frames = []
        if self.p.cached_tokens_details:
            own = {**head, "usage": None} if self.p.include_usage else dict(head)
            frames.append(sse_event({**own, "sglext": cached_tokens_sglext(usage)}))
        if self.p.include_usage:
            timings = oai_timings(self.timed, usage)
            frames.append(sse_event({**head, "usage": usage_dict(usage), **({"timings": timings} if timings else {})}))
        return frames + [SSE_DONE]


def completion_response(plan, card: ModelCard, response_id: str, results: list, usage: Usage, timed=None) -> dict:
    """The whole answer; timed: the Generation behind it, for llama.cpp's timings (/v1 only)."""
    choices = []
    for result in results:
        echo = plan.echo_texts[result.index // plan.gen.n] if plan.echo_texts else ""
        if plan.prompt.prompt_only:
            result = prompt_only_result(result)
        logprobs = (completion_logprobs(logprob_names(plan, card), result.logprobs, text_offsets(plan, card, len(echo)))
                    if plan.gen.num_logprobs is not None else None)
        choice = {"index": result.index, "text": echo + result.content, "logprobs": logprobs,
                  "finish_reason": result.finish_reason, "stop_reason": result.stop_reason}
        if plan.return_token_ids:
            choice["prompt_token_ids"] = plan.gen.all_prompt_ids[result.index // plan.gen.n]
            choice["token_ids"] = result.token_ids
        completion_choice_extras(plan, card, result, logprobs, choice)
        choices.append(choice)
    if plan.prompt.prompt_only:
        usage = Usage(usage.prompt_tokens, 0, usage.cached_tokens)
    body = {"id": response_id, "object": "text_completion", "created": int(time.time()), "model": plan.model,
            "system_fingerprint": card.fingerprint, "choices": choices, "usage": usage_dict(usage)}
    if plan.cached_tokens_details:
        body["sglext"] = cached_tokens_sglext(usage)
    timings = oai_timings(timed, usage)
    if timings is not None:
        body["timings"] = timings
    return body
