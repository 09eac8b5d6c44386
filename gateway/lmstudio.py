"""Gateway process: LM Studio /api/v0 routes: the OpenAI handlers' requests and shapes, augmented with stats."""
from __future__ import annotations

import time
from typing import Optional

from aiohttp import web

from gateway import json_out
from gateway.chat_prompt import prefill_final_assistant
from gateway.config import GatewayConfig
from gateway.engine import ChoiceResult, Delta, Engine, Generation, Usage
from gateway.errors import ApiError, InvalidRequest
from gateway.http_stream import stream_generation
from gateway.llama_cpp_fields import zero_top_p
from gateway.lmstudio_shape import model_info, model_object, runtime, stats, stop_reason
from gateway.model import ModelCard
from gateway.openai import parse_chat
from gateway.openai_completion import parse_completion
from gateway.openai_plan import check_model
from gateway.offload import run_cpu
from gateway.repetition_stop import refuse_repetition_stop
from gateway.openai_routes import OpenAIRoutes, check_request_template
from gateway.completion_shape import CompletionFramer, completion_response
from gateway.chat_stream import ChatFramer
from gateway.openai_shape import ChatShaper
from gateway.stream import SSE_DONE, sse_event
from gateway.web import json_response, read_json


class RecordingShaper(ChatShaper):
    """ChatShaper that remembers each choice's final finish_reason (after tool-call parsing) for `stats`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.finishes: dict = {}

    def split(self, delta: Delta, whole: bool = False):
        """ChatShaper.split, with each choice's finish reason kept for the stats."""
        reasoning, content, calls, finish = super().split(delta, whole)
        if finish:
            self.finishes[delta.index] = finish
        return reasoning, content, calls, finish


class _Outcome:
    """What `stats` needs from one request: timings, the first choice's finish, the matched stop string."""

    def __init__(self, card: ModelCard, gen: Generation, received: float):
        self.card, self.gen, self.received = card, gen, received
        self.finish: Optional[str] = None
        self.matched: Optional[str] = None

    def record(self, delta: Delta) -> None:
        if delta.index == 0 and delta.finish_reason:
            self.finish, self.matched = delta.finish_reason, delta.stop_reason

    def stats(self, usage: Usage, finish: Optional[str] = None) -> dict:
        num_tokens = usage.prompt_tokens + usage.completion_tokens
        reason = stop_reason(finish or self.finish, self.matched, num_tokens, self.card.max_context_len)
        return stats(usage.completion_tokens, self.received, self.gen.first_token_at, time.monotonic(), reason)


class StatsFramer:
    """Wraps an OpenAI SSE framer; a stream that asked for usage ends with a usage chunk that also carries LM Studio's
    stats."""

    def __init__(self, inner, outcome: _Outcome, head: dict, include_usage: bool,
                 shaper: Optional[RecordingShaper] = None):
        self.inner, self.outcome, self.head, self.shaper = inner, outcome, head, shaper
        self.include_usage = include_usage
        self.content_type, self.headers = inner.content_type, inner.headers

    def start(self, usage: Usage) -> list[bytes]:
        """The wrapped OpenAI framer's frames."""
        return self.inner.start(usage)

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """The wrapped framer's frames; the Delta is recorded for the stats (first token, finish)."""
        self.outcome.record(delta)
        return self.inner.delta(delta, usage)

    def end(self, usage: Usage) -> list[bytes]:
        """With include_usage, one usage chunk carrying LM Studio's stats beside usage, then [DONE]; else the wrapped
        framer's end."""
        if not self.include_usage:
            # The usage chunk has no choices: LM Studio (as OpenAI and vLLM) sends it only to a client that asked for
            # it (stream_options.include_usage); clients that read each chunk's first choice (Zed) fail on it.
            return self.inner.end(usage)
        finish = self.shaper.finishes.get(0) if self.shaper is not None else None
        body = {**self.head, "choices": [], "usage": self.inner.usage_body(usage),
                "stats": self.outcome.stats(usage, finish)}
        return [sse_event(body), SSE_DONE]

    def error(self, error: ApiError, usage: Usage) -> list[bytes]:
        """The wrapped framer's error frames."""
        return self.inner.error(error, usage)

    def keepalive(self):
        """The wrapped framer's keep-alive."""
        return self.inner.keepalive()


async def run_to_end(gen: Generation, outcome: _Outcome) -> list:
    """Collects every choice of gen (the non-streamed answer); cancels gen if the caller is cancelled."""
    results = [ChoiceResult(i) for i in range(gen.req.num_choices)]

    def absorb(delta) -> None:
        outcome.record(delta)
        results[delta.index].absorb(delta)

    await gen.drain(absorb)
    return results


def lmstudio_body(body):
    """LM Studio's request extensions: max_tokens -1 means no limit (bounded by the context). It becomes an explicit
    null, not an absent field: an absent max_tokens is 16 tokens on completions (OpenAI's default). repeat_penalty,
    in LM Studio's list of supported fields, is vLLM's repetition_penalty (which wins when both are sent). top_p 0
    keeps the most likely token, as on /api/v1."""
    if not isinstance(body, dict):
        return body
    if body.get("max_tokens") == -1:
        body = {**body, "max_tokens": None}
    if body.get("tools") in (None, []):
        # No tools, as LM Studio reads it (the /v1 routes refuse an empty list, and tool_choice auto without tools,
        # as OpenAI and vLLM do). Any other value is checked by the schema: 0 or "" is no list of tools.
        body = {key: value for key, value in body.items()
                if key != "tools" and not (key == "tool_choice" and value == "auto")}
    stop = body.get("stop")
    if stop == "" or isinstance(stop, list) and "" in stop:
        # Empty stop strings are no-ops here (the /v1 routes refuse them, as vLLM does).
        body = {**body, "stop": [s for s in stop if s] if isinstance(stop, list) else None}
    if "repeat_penalty" in body:
        body = {key: value for key, value in body.items() if key != "repeat_penalty"} | {
            "repetition_penalty": body.get("repetition_penalty", _repeat_penalty(body["repeat_penalty"]))}
    return zero_top_p(body)


def _repeat_penalty(value):
    """LM Studio's repeat_penalty, checked where it was sent (the /v1 field it becomes has its own name)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 10):
        raise InvalidRequest(f"repeat_penalty must be a number in (0, 10], got {json_out.dumps(value).decode()}",
                             param="repeat_penalty")
    return value


class LMStudioRoutes:
    """The /api/v0 surface; generation goes through Engine with the OpenAI request parsing and shapes."""

    def __init__(self, engine: Engine, config: GatewayConfig, version: str):
        self.engine, self.config, self.version = engine, config, version
        self.openai = OpenAIRoutes(engine, config)

    def register(self, app: web.Application) -> None:
        """Adds LM Studio's /api/v0 routes: models, model, chat/completions, completions, embeddings."""
        app.router.add_get("/api/v0/models", self.models)
        app.router.add_get("/api/v0/models/{model_id:.+}", self.model)
        app.router.add_post("/api/v0/chat/completions", self.chat)
        app.router.add_post("/api/v0/completions", self.completions)
        app.router.add_post("/api/v0/embeddings", self.embeddings)

    async def models(self, request: web.Request) -> web.Response:
        """GET /api/v0/models: the served model as LM Studio lists it (type, arch, quantization, state,
        max_context_length)."""
        card, name = await self.engine.card(), await self.engine.served_name()
        loaded = await self.engine.model_listed()
        # One entry per served name (SPARKINFER_SERVED_MODEL_NAME's aliases after the first), as /v1/models lists them.
        return json_response({"object": "list",
                              "data": [model_object(card, served, loaded) for served in (name, *card.served_aliases)]})

    async def model(self, request: web.Request) -> web.Response:
        """GET /api/v0/models/{id}: that entry; the 404 of an unknown model otherwise."""
        card = await self.engine.card()
        name = await self.engine.served_name()
        requested = request.match_info["model_id"].rstrip("/")
        check_model(requested, card, name)
        name = requested if requested in card.served_aliases else name
        return json_response(model_object(card, name, await self.engine.model_listed()))

    def _extras(self, card: ModelCard, outcome: _Outcome, usage: Usage, finish: Optional[str] = None) -> dict:
        return {"stats": outcome.stats(usage, finish), "model_info": model_info(card), "runtime": runtime(self.version)}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """POST /api/v0/chat/completions: OpenAI's chat answer with LM Studio's stats, model_info and runtime beside it
        (streamed: stats on the usage chunk)."""
        received = time.monotonic()
        body = prefill_final_assistant(lmstudio_body(await read_json(request)))
        check_request_template(body, self.config)
        card = await self.engine.card()
        plan = await run_cpu(parse_chat, body, card, await self.engine.served_name(),
                             cap_output=True)
        refuse_repetition_stop(body)
        shaper = RecordingShaper(plan, card, plan.gen.req_id)
        if plan.debug_render is not None:
            return json_response(shaper.render_only())
        gen = await self.engine.start(plan.gen)
        outcome = _Outcome(card, gen, received)
        if plan.stream:
            head = {"id": shaper.id, "object": "chat.completion.chunk", "created": shaper.created, "model": plan.model,
                    "system_fingerprint": card.fingerprint}
            framer = StatsFramer(ChatFramer(shaper), outcome, head, plan.include_usage, shaper)
            return await stream_generation(request, gen, framer, self.config.sse_keepalive_s)
        results = await run_to_end(gen, outcome)
        response = shaper.response(results, gen.usage())
        return json_response({**response, **self._extras(card, outcome, gen.usage(), shaper.finishes.get(0))})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """POST /api/v0/completions: OpenAI's completion answer with LM Studio's stats, model_info and runtime
        (max_tokens 0 with echo: the /v1 answer as it is)."""
        received = time.monotonic()
        body = lmstudio_body(await read_json(request))
        card = await self.engine.card()
        plan = await run_cpu(parse_completion, body, card, await self.engine.served_name(), cap_output=True,
                             read_thinking=False)
        refuse_repetition_stop(body)
        if plan.gen.max_tokens == 0:
            # echo with max_tokens 0: nothing is generated; the /v1 answer as it is.
            return await self.openai.completions(request)
        gen = await self.engine.start(plan.gen)
        outcome = _Outcome(card, gen, received)
        if plan.stream:
            framer = CompletionFramer(plan, card, plan.gen.req_id)
            head = {"id": framer.id, "object": "text_completion", "created": framer.created, "model": plan.model,
                    "system_fingerprint": card.fingerprint}
            return await stream_generation(request, gen, StatsFramer(framer, outcome, head, plan.include_usage),
                                           self.config.sse_keepalive_s)
        results = await run_to_end(gen, outcome)
        response = completion_response(plan, card, plan.gen.req_id, results, gen.usage())
        return json_response({**response, **self._extras(card, outcome, gen.usage())})

    async def embeddings(self, request: web.Request) -> web.Response:
        """POST /api/v0/embeddings: the OpenAI route's answer (no embedding model is served)."""
        return await self.openai.embeddings(request)
