"""Gateway process: LM Studio 0.4's native REST API, /api/v1: the model list and chat over the one generation path.

The chat body becomes a /v1/chat/completions one (gateway.lmstudio_v1_request) and runs through the OpenAI parser; a
finished chat is kept under its response_id unless the request said store: false (gateway.response_threads), and
previous_response_id continues a kept one; errors keep OpenAI's error object (LM Studio's carries the same type,
message, code and param). The served model is fixed when the server starts: a load or download of it answers as
LM Studio does for a model it has in memory (gateway.lmstudio_v1_models), and an unload of it marks it unloaded in
the model lists until a request loads it again; loading or unloading another model is the 404 of a model this
server lacks; downloading another model is 501, and the download status lists no job.
"""
from __future__ import annotations

import time

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.engine import ChoiceResult, Engine
from gateway.errors import ApiError, NotFound
from gateway.http_stream import stream_generation
from gateway.lmstudio_v1_models import download_answer, load_answer, unload_answer
from gateway.lmstudio_v1_request import as_sent, check_reasoning, fit_window, openai_chat_body, system_prompt
from gateway.lmstudio_v1_shape import V1ChatFramer, chat_result, chat_stats, model_entry
from gateway.response_threads import ResponseThreads
from gateway.offload import run_cpu
from gateway.repetition_stop import refuse_repetition_stop
from gateway.openai import parse_chat
from gateway.web import json_response, read_json

class LMStudioV1Routes:
    """GET /api/v1/models, POST /api/v1/chat and the served model's load and download."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine, self.config = engine, config
        self.threads = ResponseThreads("/api/v1/chat")

    def register(self, app: web.Application) -> None:
        """Adds LM Studio's /api/v1 routes: models, chat, models/load, unload, download and download status."""
        app.router.add_get("/api/v1/models", self.models)
        app.router.add_post("/api/v1/chat", self.chat)
        app.router.add_post("/api/v1/models/load", self.load)
        app.router.add_post("/api/v1/models/unload", self.unload)
        app.router.add_post("/api/v1/models/download", self.download)
        app.router.add_get("/api/v1/models/download/status", self.download_status)
        app.router.add_get("/api/v1/models/download/status/{job_id}", self.download_job)

    async def models(self, request: web.Request) -> web.Response:
        """GET /api/v1/models: {"models": [the served model's entry, an instance per served name]}."""
        card, name = await self.engine.card(), await self.engine.served_name()
        return json_response({"models": [model_entry(card, name, await self.engine.listed_load())]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """POST /api/v1/chat: LM Studio's native chat (input, system_prompt, reasoning, previous_response_id),
        answered as its result or streamed as its named events; kept for a later previous_response_id unless
        store is false."""
        received = time.monotonic()
        raw = await read_json(request)
        card, name = await self.engine.card(), await self.engine.served_name()
        thread = self.threads.thread(raw)
        body = openai_chat_body(raw, card, thread)
        check_reasoning(raw, card)
        try:
            plan = await run_cpu(parse_chat, body, card, name, cap_output=True)
            refuse_repetition_stop(body)
            fit_window(plan.gen, raw.get("context_length"), card)
            # LM Studio's JIT load: a chat with a model listed unloaded loads it, and says so (model_load events).
            loaded = self.engine.load_state.unloaded
            gen = await self.engine.start(plan.gen)
        except ApiError as exc:
            raise as_sent(exc) from None
        system, user = system_prompt(raw, thread), body["messages"][-1]["content"]

        def keep(reasoning: str, content: str):
            answer = {"role": "assistant", "content": content}
            if reasoning:
                answer["reasoning_content"] = reasoning
            return self.threads.keep(raw, thread, [{"role": "user", "content": user}, answer], system)

        if plan.stream:
            framer = V1ChatFramer(card, name, gen, received, keep, loaded)
            return await stream_generation(request, gen, framer, self.config.sse_keepalive_s)
        result = ChoiceResult(0)
        await gen.drain(result.absorb)
        stats = chat_stats(gen.usage(), result.num_reasoning_tokens, received, gen.first_token_at, time.monotonic(),
                           loaded)
        response_id = keep(result.reasoning, result.content)
        return json_response(chat_result(name, result.reasoning, result.content, stats, response_id))

    async def load(self, request: web.Request) -> web.Response:
        """POST /api/v1/models/load of the served model: LM Studio's answer for a loaded model; the model counts as
        loaded again."""
        body, card, name = await read_json(request), await self.engine.card(), await self.engine.served_name()
        answer = load_answer(body, card, name, await self.engine.live_load())
        await self.engine.check_loaded()  # and not while the scheduler drains (it refuses every new request)
        self.engine.load_state.touch(None)
        return json_response(answer)

    async def unload(self, request: web.Request) -> web.Response:
        """POST /api/v1/models/unload: LM Studio's answer; the model counts as unloaded until the next request uses it
        (keep_alive 0)."""
        body, card, name = await read_json(request), await self.engine.card(), await self.engine.served_name()
        answer = unload_answer(body, card, name)
        # keep_alive 0: LoadState's explicit unload, which the next request that uses the model undoes.
        self.engine.load_state.touch(0)
        return json_response(answer)

    async def download(self, request: web.Request) -> web.Response:
        """POST /api/v1/models/download of the served model: {"status": "already_downloaded"}; any other model is a
        501."""
        body, card, name = await read_json(request), await self.engine.card(), await self.engine.served_name()
        return json_response(download_answer(body, card, name))

    async def download_status(self, request: web.Request) -> web.Response:
        """LM Studio's lists of download jobs (docs developer/rest/download-status), all empty: a download of the served
        model answers already_downloaded with no job, and another model is not downloaded here."""
        return json_response({"downloading": [], "completed": [], "failed": [], "paused": []})

    async def download_job(self, request: web.Request) -> web.Response:
        """GET /api/v1/models/download/status/{job_id}: 404 job_not_found, no download is ever started."""
        job_id = request.match_info["job_id"]
        raise NotFound(f"download job '{job_id}' not found: this server starts no downloads", param="job_id",
                       code="job_not_found")
