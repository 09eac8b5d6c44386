"""Gateway process: aiohttp handlers of the Ollama native API (/, /api/*) over the one generation path."""
from __future__ import annotations

import functools
import re
import time
from typing import Optional

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.engine import Engine
from gateway.go_json import read_go_json
from gateway.errors import EMBEDDINGS_UNSUPPORTED, Forbidden, InvalidRequest, NotFound, NotImplementedApi
from gateway.http_stream import stream_generation
from gateway.offload import run_cpu
from gateway.model import ModelCard
from gateway.ollama_checks import FIELD_CHECKS, LOADS, NAMED_MODEL, REQUIRED
from gateway.ollama_errors import json_response, ollama_error, ollama_errors
from gateway.ollama_keepalive import parse_keep_alive
from gateway.ollama_options import parse_options
from gateway.ollama_names import INVALID_NAME, REMOTE_DETAILS, reference, resolve_model, serves, valid_name
from gateway.ollama_request import OllamaPlan, parse_chat, parse_generate
from gateway.ollama_models import created_at, ps_entry, recommendation, tags_entry
from gateway.ollama_shape import NDJSON_CONTENT_TYPE, OLLAMA_VERSION, load_response, ndjson_line
from gateway.ollama_show import show_body
from gateway.ollama_stream import NdjsonFramer, complete
from gateway.ollama_types import check_go_types
from gateway.body import read_body
from gateway.web import BODY_LIMIT_KEY, DEFAULT_BODY_LIMIT

# Endpoints this engine does not provide, each with its reason (answered 501, never 404).
_NOT_IMPLEMENTED = {
    ("POST", "/api/embed"): EMBEDDINGS_UNSUPPORTED,
    ("POST", "/api/embeddings"): EMBEDDINGS_UNSUPPORTED,
    ("POST", "/api/push"): "pushing models is not supported by this server",
    ("POST", "/api/create"): "creating models is not supported: the served model is fixed when the server starts",
    ("POST", "/api/copy"): "copying models is not supported: the served model is fixed when the server starts",
    ("DELETE", "/api/delete"): "deleting models is not supported: the served model is fixed when the server starts",
}
_BLOBS = "model blobs are not supported: the served model is fixed when the server starts"
# A blob's name as Ollama's manifest.BlobsPath takes it (manifest/paths.go); any other is its 400.
_DIGEST = re.compile(r"sha256[:-][0-9a-fA-F]{64}")
# Ollama's GET /api/status (server/routes.go StatusHandler): cloud models off, by configuration, as none is served;
# Ollama's CLI (cmd/launch/models.go cloudStatusDisabled) then refuses a cloud model at once instead of signing in.
_CLOUD_STATUS = {"cloud": {"disabled": True, "source": "config"}}
# Ollama's web tools, which its cloud runs (server/routes.go webExperimentalProxyHandler): its 403 with the cloud off.
_WEB_TOOLS = {"/api/experimental/web_search": "ollama cloud is disabled: web search is unavailable",
              "/api/experimental/web_fetch": "ollama cloud is disabled: web fetch is unavailable"}
_PULL = "pulling models is not supported: the served model is fixed when the server starts"
# What Ollama's pull of a model it has up to date reports (server/images.go PullModel), layers aside.
_PULL_STEPS = ("pulling manifest", "verifying sha256 digest", "writing manifest", "success")
# The User-Agent prefix of VS Code's Copilot Chat, whose /api/show answer Ollama adjusts (server/routes.go ShowHandler).
_COPILOT_CHAT = "GitHubCopilotChat/"


def render_response(plan: OllamaPlan, card: ModelCard, chat: bool) -> dict:
    """Ollama's answer to `_debug_render_only` (server/routes.go GenerateHandler, ChatHandler): the prompt the model
    would read (the template's special tokens included), in `_debug_info`, and nothing generated: one object with
    done false, streamed or not."""
    body = {"model": plan.model, "created_at": created_at()}
    if chat:
        body["message"] = {"role": "", "content": ""}
    else:
        body["response"] = ""
    body["done"] = False
    body["_debug_info"] = {"rendered_template": card.decode(plan.gen.prompt_ids, skip_special_tokens=False)}
    return body


class OllamaRoutes:
    """The Ollama surface; /api/chat and /api/generate go through Engine like every other API."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine = engine
        self.config = config

    def register(self, app: web.Application) -> None:
        """Adds Ollama's /api routes, its root probe and the cloud-only ones it refuses."""
        app.router.add_get("/", self.root)
        app.router.add_get("/api/version", self.version)
        app.router.add_get("/api/tags", self.tags)
        app.router.add_get("/api/ps", self.ps)
        app.router.add_post("/api/show", self.show)
        app.router.add_post("/api/chat", self.chat)
        app.router.add_post("/api/generate", self.generate)
        app.router.add_post("/api/pull", self.pull)
        app.router.add_get("/api/status", self.status)
        app.router.add_get("/api/experimental/model-recommendations", self.recommendations)
        for path, words in _WEB_TOOLS.items():
            app.router.add_post(path, functools.partial(self.web_tool, words=words))
        for route, reason in _NOT_IMPLEMENTED.items():
            handler = functools.partial(self.not_implemented, reason=reason, required=REQUIRED.get(route),
                                        named=NAMED_MODEL.get(route), check=FIELD_CHECKS.get(route),
                                        load=LOADS.get(route))
            app.router.add_route(*route, handler)
        app.router.add_route("HEAD", "/api/blobs/{digest}", self.blob)
        app.router.add_post("/api/blobs/{digest}", self.blob)

    async def root(self, request: web.Request) -> web.Response:
        """GET /: "Ollama is running", the text Ollama's clients probe for."""
        return web.Response(text="Ollama is running", content_type="text/plain")

    async def version(self, request: web.Request) -> web.Response:
        """GET /api/version: {"version": OLLAMA_VERSION}, the Ollama API this follows."""
        return json_response({"version": OLLAMA_VERSION})

    async def status(self, request: web.Request) -> web.Response:
        """GET /api/status: Ollama's cloud status, disabled (no cloud model is served)."""
        return json_response(_CLOUD_STATUS)

    @ollama_errors
    async def recommendations(self, request: web.Request) -> web.Response:
        """GET /api/experimental/model-recommendations: Ollama's picks for `ollama launch` and its VS Code extension
        (server/routes.go ModelRecommendationsExperimentalHandler, always 200), here the served model alone: it 404ed,
        and both then fell back to Ollama's built-in list of models to pull, which this server refuses."""
        card, name = await self.engine.card(), await self.engine.served_name()
        return json_response({"recommendations": [recommendation(card, name)]})

    @ollama_errors
    async def web_tool(self, request: web.Request, words: str) -> web.Response:
        """The 403 Ollama answers with its cloud off, after its 400 for a body with nothing in it."""
        if not (await read_body(request, request.app.get(BODY_LIMIT_KEY, DEFAULT_BODY_LIMIT))).strip():
            raise InvalidRequest("missing request body")
        raise Forbidden(words)

    @ollama_errors
    async def blob(self, request: web.Request) -> web.Response:
        """Ollama's blob routes (server/routes.go HeadBlobHandler, CreateBlobHandler): a digest that is no
        `sha256:<64 hex>` is its 400 "invalid digest format"; HEAD asks whether the blob is here, and none is: its
        404 (`ollama create` and older clients then upload it and read the POST's answer); a POST is the 501 with
        the reason, as no model can be created from it."""
        digest = request.match_info["digest"]
        if not _DIGEST.fullmatch(digest):
            raise InvalidRequest("invalid digest format", param="digest")
        if request.method == "HEAD":
            raise NotFound(f'blob "{digest}" not found', param="digest")
        raise NotImplementedApi(_BLOBS)

    @ollama_errors
    async def tags(self, request: web.Request) -> web.Response:
        """GET /api/tags: {"models": [the served model as Ollama lists it]}, once for each served name, as Ollama
        lists the names `ollama cp` gave one model (each its own entry, the same digest and size)."""
        card, name = await self.engine.card(), await self.engine.served_name()
        return json_response({"models": [tags_entry(card, served) for served in (name, *card.served_aliases)]})

    @ollama_errors
    async def ps(self, request: web.Request) -> web.Response:
        """GET /api/ps: the served model while loaded (expires_at, size_vram); [] while no worker runs it."""
        expires = self.engine.load_state.expires_at(busy=self.engine.generating())
        # A dead worker (or an unreachable scheduler) holds no model: Ollama lists none then.
        device = None if expires is None else await self.engine.model_device()
        if device is None:
            return json_response({"models": []})
        card, name = await self.engine.card(), await self.engine.served_name()
        return json_response({"models": [ps_entry(card, name, expires, on_cpu=device.startswith("cpu"),
                                                  context_length=self.engine.load_state.context_length)]})

    @ollama_errors
    async def show(self, request: web.Request) -> web.Response:
        """POST /api/show: the served model's details, template, parameters and capabilities (404 otherwise)."""
        body = check_go_types(await read_go_json(request), "ShowRequest")
        card = await self.engine.card()
        name = await self.engine.served_name()
        requested = resolve_model(body, card, name, cloud_off=REMOTE_DETAILS)
        answer = show_body(card, name, body.get("system") or "", body.get("options"))
        if request.headers.get("User-Agent", "").startswith(_COPILOT_CHAT):
            # Copilot Chat labels the model with general.basename: the name it asked for, as Ollama answers it.
            answer["model_info"]["general.basename"] = requested
        return json_response(answer)

    @ollama_errors
    async def chat(self, request: web.Request) -> web.StreamResponse:
        """POST /api/chat: Ollama's chat, NDJSON lines when streamed (the default), one object otherwise."""
        return await self._generate(request, chat=True)

    @ollama_errors
    async def generate(self, request: web.Request) -> web.StreamResponse:
        """POST /api/generate: Ollama's generate (raw or templated prompt), NDJSON when streamed."""
        return await self._generate(request, chat=False)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        received = time.monotonic()
        body = await read_go_json(request)
        card = await self.engine.card()
        parse = parse_chat if chat else parse_generate
        plan = await run_cpu(parse, body, card, await self.engine.served_name())
        if plan.gen is None:
            if not plan.unload:
                # Ollama's handlers answer done_reason "load" after scheduleRunner has the runner, its error else
                # (server/routes.go GenerateHandler, ChatHandler): `ollama run` preloads so and reports the failure.
                await self.engine.check_loaded()
            self.engine.load_state.touch(plan.keep_alive, plan.num_ctx)
            return json_response(load_response(plan, chat))
        if plan.render_only:
            self.engine.load_state.touch(plan.keep_alive, plan.num_ctx)
            return json_response(render_response(plan, card, chat))
        plan.gen.keep_alive, plan.gen.num_ctx = plan.keep_alive, plan.num_ctx
        gen = await self.engine.start(plan.gen)
        if plan.stream:
            framer = NdjsonFramer(plan, card, gen, chat, received)
            return await stream_generation(request, gen, framer, self.config.sse_keepalive_s)
        return json_response(await complete(plan, card, gen, chat, received))

    @ollama_errors
    async def pull(self, request: web.Request) -> web.Response:
        """Pulling the served model succeeds, as Ollama's pull of a model it has up to date does (its progress,
        ending with "success"; {"status": "success"} with stream false): clients pull before use. Any other model
        cannot be pulled here: the 501 with the reason."""
        body = check_go_types(await read_go_json(request), "PullRequest")
        name, stream = body.get("model") or body.get("name") or "", body.get("stream")
        # PullHandler's model reference parse answers a name that reads as none or as no Ollama name alike.
        if not reference(name) or not valid_name(reference(name)):
            raise InvalidRequest(INVALID_NAME, param="model")
        if not serves(name, await self.engine.card(), await self.engine.served_name()):
            raise NotImplementedApi(_PULL)
        if stream is False:
            return json_response({"status": "success"})
        lines = b"".join(ndjson_line({"status": step}) for step in _PULL_STEPS)
        return web.Response(body=lines, content_type=NDJSON_CONTENT_TYPE)

    @ollama_errors
    async def not_implemented(self, request: web.Request, reason: str, required: Optional[tuple] = None,
                              named: Optional[tuple] = None, check=None, load=None) -> web.Response:
        """The 501 with its reason, after the checks Ollama's handler makes first: its decode 400 for a body its
        struct cannot take (keep_alive too, where a route that loads takes one), its 4xx for a body naming no model
        (_REQUIRED), its field checks (_FIELD_CHECKS), its 404 for a model it lacks; a body asking for no work is the
        route's load instead (LOADS), which keeps the model as keep_alive says."""
        if required is not None:
            struct, names = required
            body = check_go_types(await read_go_json(request), struct)
            keep_alive = parse_keep_alive(body.get("keep_alive")) if load is not None else None
            trims = named is not None and named[0] != ("source",)
            for keys, error, message in names:
                values = [body.get(key) for key in keys]
                if not any(reference(v) if trims and isinstance(v, str) else v for v in values):
                    raw = next((v for v in values if isinstance(v, str) and v), "")
                    raise error(message.format(raw), param=keys[0])
            if check is not None:
                check(body)
            if named is not None:
                await self._check_named_model(body, *named)
            if load is not None:
                # The embedding handlers schedule the runner with the request's options before they read the input
                # (server/routes.go EmbedHandler, EmbeddingsHandler: scheduleRunner, modelOptions): a value of the
                # wrong type is refused first, a load or text to embed alike.
                options = parse_options(body.get("options"), await self.engine.card())
                answer = load(body)
                if answer is not None:
                    await self.engine.check_loaded()  # after scheduleRunner, as for /api/generate's load
                    self.engine.load_state.touch(keep_alive, options.num_ctx)
                    return json_response(answer)
        return ollama_error(NotImplementedApi(reason))

    async def _check_named_model(self, body: dict, keys: tuple, not_found: str, invalid: str) -> None:
        """Ollama's 404 when the body names a model this server does not serve (a management request on a model it
        lacks), after its 400 for a name that is no Ollama name: the 501 is only for what cannot be done to the
        served model."""
        names = [body.get(key) for key in keys]
        name = next((n for n in names if isinstance(n, str) and n), None)
        if name is None or serves(name, await self.engine.card(), await self.engine.served_name()):
            return
        # CopyHandler parses its source as it is; the others trim it and drop ":local" first (modelref.ParseRef).
        if not valid_name(name if keys == ("source",) else reference(name)):
            raise InvalidRequest(invalid.format(name), param=keys[0])
        raise NotFound(not_found.format(name), param=keys[0])
