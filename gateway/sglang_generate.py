"""Gateway process: SGLang's native POST /generate (python/sglang/srt/entrypoints/http_server.py generate_request),
what SGLang's own clients send: its bench_serving (--backend sglang), RL rollout workers (verl, slime, AReaL), the
sglang RuntimeEndpoint. The body (sglang_generate_request) runs as the /v1/completions request it asks for.

Answer, per prompt and sample (TokenizerManager._handle_batch_output): {"text": the output so far, "output_ids": its
token ids, "meta_info": {id, finish_reason, prompt_tokens, completion_tokens, cached_tokens, e2e_latency, ...}};
finish_reason null until it ends, then {"type": "length", "length": N}, {"type": "stop", "matched": the stop string
or the token id}. A list of prompts (or n > 1) answers a list. Streamed: `data: ` events of the whole output so far
(text and ids grow, as SGLang streams without --incremental-streaming-output), a batch's with its "index", then
`data: [DONE]`; an error once the stream is open is `data: {"error": {"message": ...}}` then [DONE], as SGLang's."""
from __future__ import annotations

import time
import uuid
from typing import Optional

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.engine import ChoiceResult, Delta, Engine, Usage
from gateway.errors import ApiError, ContextLengthExceeded
from gateway.http_stream import open_stream, stream_generation
from gateway.llama_cpp_clients import high_temperature
from gateway.offload import run_cpu
from gateway.repetition_stop import refuse_repetition_stop
from gateway.openai_completion import parse_completion
from gateway.openai_shape import SSE_HEADERS
from gateway.prompt_logprobs import prompt_only_result
from gateway.sglang_generate_request import (GenerateOptions, as_sent, check_logprob_start, completion_body,
                                             context_overflow_message)
from gateway.sglang_info import WEIGHT_VERSION
from gateway.stream import SSE_DONE, SseFramer, sse_event
from gateway.web import json_response, read_json


def _ids(options: GenerateOptions, num_choices: int) -> list:
    """Each answer's meta_info id: the request's rid, a list's own per prompt, else SGLang's prefix_i per item;
    without one, a fresh uuid4 hex each, as SGLang's normalization makes them."""
    rid = options.rid
    if isinstance(rid, list) and len(rid) == num_choices and all(isinstance(r, str) for r in rid):
        return list(rid)
    if isinstance(rid, str) and rid:
        return [rid] if num_choices == 1 else [f"{rid}_{i}" for i in range(num_choices)]
    return [uuid.uuid4().hex for _ in range(num_choices)]


def finish_reason(result: ChoiceResult) -> Optional[dict]:
    """SGLang's finish reason object (schedule_batch FINISH_LENGTH, FINISH_MATCHED_STR, FINISH_MATCHED_TOKEN)."""
    if result.finish_reason is None:
        return None
    if result.finish_reason == "length":
        return {"type": "length", "length": len(result.token_ids)}
    if result.finish_reason == "stop":
        matched = result.stop_reason
        if matched is None and result.token_ids:
            matched = result.token_ids[-1]      # the end token that stopped it
        return {"type": "stop", "matched": matched}
    # Cancelled (/abort_request, vLLM's cancel routes): SGLang's FINISH_ABORT.
    return {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}


class GenerateShaper:
    """One /generate request's answer bodies, built from each choice's output so far."""

    def __init__(self, plan, card, options: GenerateOptions, received: float):
        self.plan, self.card, self.options, self.received = plan, card, options, received
        self.ids = _ids(options, plan.gen.num_choices)

    def _tuple(self, token_id: int, logprob) -> list:
        text = self.card.token_text(token_id) if self.options.text_in_logprobs else None
        return [logprob, token_id, text]

    def _tops(self, entries: list) -> list:
        return [[self._tuple(t, lp) for t, lp in entry.top[:self.options.top_logprobs_num]] or None
                for entry in entries]

    def _logprobs(self, meta: dict, result: ChoiceResult, prompt_ids: list) -> None:
        """SGLang's logprob fields: [logprob, token id, text (with return_text_in_logprobs) or null] per token; the
        prompt's from logprob_start_len on, with top_logprobs_num alternatives. The window's first entry has no logprob
        (null, and null top logprobs) wherever it starts, as SGLang's scheduler pads it (input_token_logprobs_val =
        [None] + the rows from logprob_start_len on, their last the sampled token's): SGLang clients skip or average
        over it so (RuntimeEndpoint.select's compute_normalized_prompt_logprobs keeps the non-null values of a window
        from prompt_tokens - 2; RL teachers read input_token_logprobs[1:])."""
        start = self.options.logprob_start_len
        if start < 0:
            # SGLang's default window: the last prompt token alone (its scheduler sets len - 1: output logprobs only),
            # none for a request that reads the prompt only (max_new_tokens 0).
            start = len(prompt_ids) if self.options.max_new_tokens == 0 else len(prompt_ids) - 1
        prompt = []
        if start >= 0:
            entries = [None] + list(result.prompt_logprobs or [])
            prompt = [(i, entries[i] if start < i < len(entries) else None) for i in range(start, len(prompt_ids))]
        meta["input_token_logprobs"] = [self._tuple(prompt_ids[i], e.logprob if e else None) for i, e in prompt]
        meta["output_token_logprobs"] = [self._tuple(e.token_id, e.logprob) for e in result.logprobs]
        if self.options.top_logprobs_num > 0:
            meta["input_top_logprobs"] = [self._tops([e])[0] if e else None for _, e in prompt]
            meta["output_top_logprobs"] = self._tops(result.logprobs)

    def body(self, result: ChoiceResult, usage: Usage) -> dict:
        """SGLang's answer for one choice: text, output_ids and meta_info (finish_reason object, token counts, cached
        tokens, logprobs where asked)."""
        prompt = result.index // self.plan.gen.n
        prompt_ids = self.plan.gen.all_prompt_ids[prompt]
        cached = usage.per_prompt[prompt][1] if len(usage.per_prompt) > prompt else usage.cached_tokens
        if self.plan.prompt.prompt_only:
            result = prompt_only_result(result) if result.finish_reason else result
        meta = {"id": self.ids[result.index], "finish_reason": finish_reason(result), "prompt_tokens": len(prompt_ids),
                "weight_version": WEIGHT_VERSION}
        if self.options.return_logprob:
            self._logprobs(meta, result, prompt_ids)
        meta.update(completion_tokens=len(result.token_ids), cached_tokens=cached)
        if result.finish_reason is not None:
            # Set once the request finished, as SGLang's TokenizerManager sets it.
            meta["e2e_latency"] = time.monotonic() - self.received
        out = {"text": result.content, "output_ids": list(result.token_ids), "meta_info": meta}
        if self.options.prompt_token_ids:
            # SGLang's return_prompt_token_ids (TokenizerManager keeps the tokenized input's ids on the request's state
            # and adds them to every answer, streamed ones too), which RL recorders read the prompt's tokens from.
            out["prompt_token_ids"] = list(prompt_ids)
        if self.options.batch and self.options.stream:
            out["index"] = result.index
        return out

    def answer(self, results: list, usage: Usage):
        """The non-streamed answer: a list for a batch request, the one object otherwise."""
        bodies = [self.body(result, usage) for result in results]
        return bodies if self.options.batch else bodies[0]


class GenerateFramer(SseFramer):
    """SSE framing of a /generate stream: an event per piece with the choice's whole output so far, then [DONE]."""
    content_type = "text/event-stream; charset=utf-8"
    headers = SSE_HEADERS

    def __init__(self, shaper: GenerateShaper):
        self.shaper = shaper
        self.results = [ChoiceResult(i) for i in range(shaper.plan.gen.num_choices)]

    def start(self, usage: Usage) -> list[bytes]:
        """Nothing: SGLang's first event carries the first text."""
        return []

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """One event with the choice's output so far (text, output_ids, meta_info), as SGLang streams /generate."""
        result = self.results[delta.index]
        result.absorb(delta)
        if not (delta.content or delta.token_ids or delta.finish_reason):
            return []
        return [sse_event(self.shaper.body(result, usage))]

    def end(self, usage: Usage) -> list[bytes]:
        """[DONE]."""
        return [SSE_DONE]

    def error(self, error: ApiError, usage: Usage) -> list[bytes]:
        """SGLang's mid-stream error event ({"error": {"message"}}), then [DONE]."""
        return [sse_event({"error": {"message": error.message}}), SSE_DONE]


class SGLangGenerateRoutes:
    """POST /generate."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine, self.config = engine, config

    def register(self, app: web.Application) -> None:
        """Adds POST /generate."""
        app.router.add_post("/generate", self.generate)

    async def generate(self, request: web.Request) -> web.StreamResponse:
        """POST /generate: SGLang's native generation (text or input_ids, sampling_params), answered or streamed in its
        shape."""
        received = time.monotonic()
        body = await read_json(request)
        translated, options = completion_body(body)
        card = await self.engine.card()
        try:
            # SGLang's default limit stops where the context is full (its scheduler's init_req_max_new_tokens caps it);
            # a max_new_tokens sent past the room the prompt leaves is its TokenizerManager's 400.
            plan = await run_cpu(parse_completion, translated, card, await self.engine.served_name(),
                                 cap_output=not options.limit_sent)
            refuse_repetition_stop(translated)
            # SGLang's SamplingParams.verify: a temperature is non-negative and finite, with no upper bound
            high_temperature(body.get("sampling_params"), plan.gen.sampling)
        except ApiError as error:
            if isinstance(error, ContextLengthExceeded) and error.ctx is not None:
                error.message = context_overflow_message(error)
            raise as_sent(error, body) from None
        check_logprob_start(options, plan.gen.all_prompt_ids)
        plan.stream = options.stream
        plan.gen.min_tokens_hold_stop = False
        shaper = GenerateShaper(plan, card, options, received)
        if options.max_new_tokens == 0 and not plan.prompt.prompt_only:
            # Nothing to generate and nothing to score: the prompt is read and counted, as SGLang answers it.
            return await self._prompt_only(request, shaper)
        # SGLang's /abort_request names a request by its rid (a batch's items by rid_i too).
        plan.gen.cancel_ids = {**({options.rid: None} if isinstance(options.rid, str) and options.rid else {}),
                               **{rid: [i] for i, rid in enumerate(shaper.ids)}}
        gen = await self.engine.start(plan.gen)
        shaper.received = min(received, gen.started_at)
        if options.stream:
            return await stream_generation(request, gen, GenerateFramer(shaper), self.config.sse_keepalive_s)
        results = await self.engine.results(gen)
        # On the CPU pool: 128 prompts of 600 tokens with their logprobs held the event loop 1.7-2.8 s.
        return json_response(await run_cpu(shaper.answer, results, gen.usage()))

    async def _prompt_only(self, request: web.Request, shaper: GenerateShaper) -> web.StreamResponse:
        """max_new_tokens 0: no output, finish length 0; streamed, each answer's one event, then [DONE]."""
        gen = shaper.plan.gen
        results = [ChoiceResult(i, finish_reason="length") for i in range(gen.num_choices)]
        usage = Usage(per_prompt=[(len(ids), 0) for ids in gen.all_prompt_ids])
        if not shaper.options.stream:
            return json_response(shaper.answer(results, usage))
        response = await open_stream(request, GenerateFramer.content_type, GenerateFramer.headers)
        for result in results:
            await response.write(sse_event(shaper.body(result, usage)))
        await response.write(SSE_DONE)
        await response.write_eof()
        return response
