"""Gateway process: aiohttp handlers of the OpenAI /v1 routes (models, chat, completions, tokenize, score) and of
vLLM's /generative_scoring."""
from __future__ import annotations

import uuid

from aiohttp import web

from gateway.anthropic_shape import model_info
from gateway.chat_batch import batch_chat
from gateway.chat_prompt import llama_cpp_prefill, lower_roles, text_string_parts
from gateway.config import GatewayConfig
from gateway.engine import ChoiceResult, Delta, Engine, Usage
from gateway.errors import EMBEDDINGS_UNSUPPORTED, ApiError, InvalidRequest, NotImplementedApi, Unsupported
from gateway.http_stream import open_stream, stream_generation
from gateway.legacy_functions import legacy_functions, named_as_sent
from gateway.llama_cpp_fields import content_ids, sse_pings, with_pieces
from gateway.llama_cpp_shape import model_meta, models_entry
from gateway.openai_checks import check_tools, null_max_tokens_as_default, vocab_ids
from gateway.openai import chat_prompt_text, check_messages_and_tools, parse_chat
from gateway.openai_completion import parse_completion
from gateway.request_id_header import response_id
from gateway.openai_plan import Plan, check_model
from gateway.openai_schema import DETOKENIZE_SCHEMA, TOKENIZE_SCHEMA
from gateway.tool_choice import function_types
from gateway.completion_shape import CompletionFramer, completion_response
from gateway import generative_scoring
from gateway.chat_stream import ChatFramer
from gateway.openai_shape import ChatShaper
from gateway.offload import run_cpu
from gateway.score import (SCORE_SCHEMA, check_fits, check_parts, check_size, completion_ids, score_request,
                           score_response)
from gateway.schema_validate import validate
from gateway.web import json_response, read_json


def render_body(body, schema: dict = TOKENIZE_SCHEMA) -> dict:
    """A /tokenize, /apply-template or /v1/score body (`schema`) validated as the chat route reads it: roles in any
    case, plain strings as text parts, tools without `type`, the deprecated `functions` and an earlier turn's
    `function_call` / `function` message as the tools, tool call and result they are on /v1/chat/completions
    (legacy_functions), so the rendering is that chat request's prompt; errors name the fields sent."""
    body = function_types(text_string_parts(lower_roles(body)))
    legacy = isinstance(body, dict) and body.get("functions") is not None
    try:
        body = validate(legacy_functions(body) if isinstance(body, dict) else body, schema)
        check_tools(body.get("tools"))
    except ApiError as exc:
        raise named_as_sent(exc) if legacy else exc
    return body


def rendered_messages(body: dict, card) -> str:
    """The prompt a /v1 chat request with these fields (messages, tools, tool_choice, template fields) gets: the chat
    route's own rendering, for /tokenize, llama.cpp's /apply-template and /v1/score, after its checks of the messages
    and tools (CPU work: run it off the loop)."""
    check_messages_and_tools(body)
    return chat_prompt_text(body, card)


def _tokenize(body: dict, card) -> list:
    """The ids of a /tokenize body's prompt or rendered messages (CPU work: run it off the loop)."""
    if "messages" in body:
        text = rendered_messages(body, card)
    elif "content" in body:
        return content_ids(card, body["content"], body.get("parse_special"))
    else:
        text = body["prompt"]
    return card.encode(text)


def _score_ids(body: dict, card) -> tuple:
    """(prompt ids, completion ids) of a /v1/score body: its messages rendered as the chat route renders them, or its
    raw prompt (CPU work: run it off the loop)."""
    text = rendered_messages(body, card) if "messages" in body else body["prompt"]
    check_size(text, body, card, "messages" if "messages" in body else "prompt")
    return card.encode(text), completion_ids(body, card)


def check_request_template(body, config: GatewayConfig) -> None:
    """400 for a request's own chat_template unless the server trusts them: the sandbox bounds what a template may
    touch, not how long it runs (two nested range(100000) loops held a gateway thread and the GIL for hours;
    vLLM's GHSA-6fvq-23cw-5628, hence its --trust-request-chat-template)."""
    if isinstance(body, dict) and body.get("chat_template") and not config.trust_request_chat_template:
        raise Unsupported("chat_template: a template sent with the request is rendered only when the server trusts "
                          "request templates (SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE=1, as vLLM's "
                          "--trust-request-chat-template)", param="chat_template")


def model_permission(name: str, created: int) -> dict:
    """The one ModelPermission vLLM's model card lists (OpenAI's model object had it until late 2023): clients written
    then (openai-kotlin 3.5, PHP and Java SDKs) require the array; its id stays the same for the same served name."""
    return {"id": f"modelperm-{uuid.uuid5(uuid.NAMESPACE_URL, name).hex}", "object": "model_permission",
            "created": created, "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
            "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False, "organization": "*",
            "group": None, "is_blocking": False}


class OpenAIRoutes:
    """The /v1 surface; every generation goes through Engine (the one generation path)."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine = engine
        self.config = config

    def register(self, app: web.Application) -> None:
        """Adds the OpenAI /v1 routes, their unprefixed aliases and vLLM's / SGLang's extras."""
        app.router.add_get("/v1/models", self.models)
        # llama.cpp's server lists its model at /models too (a client whose base URL has no /v1 asks there).
        app.router.add_get("/models", self.models)
        app.router.add_get("/v1/models/{model_id:.+}", self.model)
        app.router.add_post("/v1/chat/completions", self.chat)
        # llama.cpp's server takes chat at /chat/completions too (a client whose base URL has no /v1 posts there).
        app.router.add_post("/chat/completions", self.chat)
        app.router.add_post("/v1/chat/completions/batch", self.chat_batch)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/tokenize", self.tokenize)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_post("/v1/detokenize", self.detokenize)
        app.router.add_post("/detokenize", self.detokenize)
        app.router.add_post("/v1/score", self.score)
        # vLLM's own path for its Score API (/v1/score is its alias there).
        app.router.add_post("/score", self.score)
        app.router.add_post("/generative_scoring", self.generative_scoring)
        app.router.add_post("/v1/embeddings", self.embeddings)
        # llama.cpp's server takes embeddings at /embedding and /embeddings too: the same 501 with the reason.
        app.router.add_post("/embedding", self.embeddings)
        app.router.add_post("/embeddings", self.embeddings)

    async def _model_object(self, request: web.Request, name: str = "") -> dict:
        card = await self.engine.card()
        name = name or await self.engine.served_name()
        # As vLLM's ModelCard: id is the served name (--served-model-name), root the checkpoint it serves.
        model = {"id": name, "object": "model", "created": card.created, "owned_by": "sparkinfer",
                 "root": card.checkpoint_path, "parent": None, "max_model_len": card.max_context_len,
                 "permission": [model_permission(name, card.created)], "meta": model_meta(card)}
        if "anthropic-version" not in request.headers:
            return model
        return {**model, **model_info(name, card.created, card.max_context_len)}

    async def models(self, request: web.Request) -> web.Response:
        """GET /v1/models: the served model (OpenAI's list, llama-server's models array beside it)."""
        # llama-server's list also has its Ollama-shaped `models` array, which llama.cpp clients read the name from.
        card, name = await self.engine.card(), await self.engine.served_name()
        # As vLLM's list: one model card per served name (SPARKINFER_SERVED_MODEL_NAME's aliases after the first).
        data = [await self._model_object(request, served) for served in (name, *card.served_aliases)]
        # Anthropic's page fields, for its SDKs' list (they page on has_more and last_id).
        page = {"has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]} if "type" in data[0] else {}
        return json_response({"object": "list", "data": data, "models": [models_entry(card, name)], **page})

    async def model(self, request: web.Request) -> web.Response:
        """GET /v1/models/{id}: the served model's object; an unknown id is the 404 model_not_found."""
        card, requested = await self.engine.card(), request.match_info["model_id"].rstrip("/")
        check_model(requested, card, await self.engine.served_name())
        return json_response(await self._model_object(request, requested if requested in card.served_aliases else ""))

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/chat/completions: a chat.completion, or chat.completion.chunk events (stream)."""
        body = llama_cpp_prefill(await read_json(request))
        check_request_template(body, self.config)
        card = await self.engine.card()
        plan = await run_cpu(parse_chat, body, card, await self.engine.served_name())
        shaper = ChatShaper(plan, card, response_id(request, body, "chatcmpl", plan.gen.req_id))
        plan.gen.cancel_ids = {shaper.id: None}
        if plan.debug_render is not None:
            # One object, streamed or not, as Ollama's handler answers it: nothing is generated.
            return json_response(shaper.render_only())
        if plan.stream:
            gen = shaper.timed = await self.engine.start(plan.gen)
            shaper.timings_per_token = body.get("timings_per_token") is True
            shaper.return_progress = body.get("return_progress") is True
            return await stream_generation(request, gen, ChatFramer(shaper),
                                           *sse_pings(body, self.config.sse_keepalive_s))
        results, shaper.timed = await self.engine.run(plan.gen)
        # The answer is built on the CPU pool, as the prompt is: many long prompts' logprobs held the loop seconds.
        return json_response(await run_cpu(shaper.response, results, shaper.timed.usage()))

    async def chat_batch(self, request: web.Request) -> web.Response:
        """vLLM's /v1/chat/completions/batch: one choice per conversation (gateway/chat_batch.py)."""
        body = await read_json(request)
        check_request_template(body, self.config)
        return await batch_chat(request, body, self.engine, self.config, response_id)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/completions: a text_completion, or its chunks as SSE events (stream)."""
        body = null_max_tokens_as_default(await read_json(request))
        card = await self.engine.card()
        plan = await run_cpu(parse_completion, body, card, await self.engine.served_name())
        rid = response_id(request, body, "cmpl", plan.gen.req_id)
        plan.gen.cancel_ids = {rid: None}
        if plan.gen.max_tokens == 0:
            return await self._echo_only(request, plan, card, rid)
        if plan.stream:
            framer = CompletionFramer(plan, card, rid)
            gen = framer.timed = await self.engine.start(plan.gen)
            framer.timings_per_token = body.get("timings_per_token") is True
            framer.return_progress = body.get("return_progress") is True
            return await stream_generation(request, gen, framer, *sse_pings(body, self.config.sse_keepalive_s))
        results, gen = await self.engine.run(plan.gen)
        # On the CPU pool: 128 prompts of 600 tokens echoed with 5 logprobs each held the event loop 4.9 s.
        return json_response(await run_cpu(completion_response, plan, card, rid, results, gen.usage(), gen))

    async def _echo_only(self, request: web.Request, plan: Plan, card, rid: str) -> web.StreamResponse:
        """max_tokens 0 with echo: the prompt comes back, nothing is generated (finish_reason length)."""
        results = [ChoiceResult(i, finish_reason="length") for i in range(plan.gen.num_choices)]
        # Per prompt too: continuous_usage_stats gives each choice's chunks its own prompt's count, as vLLM does.
        per_prompt = [(len(ids), 0) for ids in plan.gen.all_prompt_ids]
        usage = Usage(prompt_tokens=sum(count for count, _ in per_prompt), per_prompt=per_prompt)
        if not plan.stream:
            return json_response(completion_response(plan, card, rid, results, usage))
        framer = CompletionFramer(plan, card, rid)
        response = await open_stream(request, framer.content_type, framer.headers)
        frames = framer.start(usage)
        for result in results:
            frames += framer.delta(Delta(result.index, finish_reason="length"), usage)
        for frame in frames + framer.end(usage):
            await response.write(frame)
        await response.write_eof()
        return response

    async def score(self, request: web.Request) -> web.Response:
        """Teacher-forced scoring of a completion after a prompt (gateway/score.py), or SGLang's label scoring."""
        body = await read_json(request)
        if generative_scoring.is_sglang_body(body):
            return await self._sglang_score(body)
        generative_scoring.refuse_pooling_score(body)
        body = render_body(body, SCORE_SCHEMA)
        check_request_template(body, self.config)
        check_parts(body)
        card = await self.engine.card()
        name = await self.engine.served_name()
        check_model(body.get("model"), card, name)
        prompt_ids, completion = await run_cpu(_score_ids, body, card)
        check_fits(len(prompt_ids), len(completion), card, "messages" if "messages" in body else "prompt")
        top = body.get("top_logprobs") or 0
        results, _ = await self.engine.complete(score_request(prompt_ids, completion, top))
        return json_response(score_response(card, name, len(prompt_ids), completion, results[0].prompt_logprobs,
                                            top))

    async def generative_scoring(self, request: web.Request) -> web.Response:
        """vLLM's Generative Scoring API: each item's next-token label probability (gateway/generative_scoring.py)."""
        body = validate(await read_json(request), generative_scoring.SCHEMA)
        card = await self.engine.card()
        name = await self.engine.served_name()
        check_model(body.get("model"), card, name)
        generative_scoring.check_body(body, card)
        prompts = await run_cpu(generative_scoring.item_prompts, body, card)
        return json_response(await generative_scoring.vllm_answer(self.engine, body, prompts, name))

    async def _sglang_score(self, body) -> web.Response:
        """SGLang's /v1/score (a body with label_token_ids): every label's next-token probability per item."""
        body = validate(body, generative_scoring.SGLANG_SCHEMA)
        card = await self.engine.card()
        name = await self.engine.served_name()
        check_model(body.get("model"), card, name)
        body = generative_scoring.sglang_body(body, card)
        prompts = await run_cpu(generative_scoring.item_prompts, body, card)
        return json_response(await generative_scoring.sglang_answer(self.engine, body, prompts, name))

    async def embeddings(self, request: web.Request) -> web.Response:
        """POST /v1/embeddings (and aliases): an unknown model's 404, else 501 (no embedding model)."""
        body = await read_json(request)
        # A model this server does not serve is the 404 every other route gives it (vLLM checks the model first).
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            check_model(body["model"], await self.engine.card(), await self.engine.served_name())
        # 501 with the reason, as design.md section 3 and the 0.5.6 release notes specify for endpoints the engine
        # does not do; `x-should-retry: false` stops the OpenAI SDKs retrying a 5xx (they honour that header).
        raise NotImplementedApi(EMBEDDINGS_UNSUPPORTED,
                                code="embeddings_unsupported", headers={"x-should-retry": "false"})

    async def tokenize(self, request: web.Request) -> web.Response:
        """POST /v1/tokenize: vLLM's {count, max_model_len, tokens, token_strs} of a prompt or messages."""
        body = render_body(await read_json(request))
        check_request_template(body, self.config)
        card = await self.engine.card()
        name = await self.engine.served_name()
        check_model(body.get("model"), card, name)
        if sum(key in body for key in ("messages", "prompt", "content")) != 1:
            raise InvalidRequest("give exactly one of 'messages' or 'prompt' (or llama.cpp's 'content')",
                                 param="messages")
        ids = await run_cpu(_tokenize, body, card)
        # vLLM's return_token_strs: the vocabulary entries of the ids; the key is always there (null unless asked).
        strs = card.token_pieces(ids) if body.get("return_token_strs") else None
        limit = card.max_context_len
        tokens = with_pieces(card, ids) if body.get("with_pieces") else ids
        return json_response({"tokens": tokens, "token_strs": strs, "count": len(ids), "max_model_len": limit,
                              "max_context": limit, "model": name})

    async def detokenize(self, request: web.Request) -> web.Response:
        """POST /v1/detokenize: {"prompt": text} of token ids (vLLM; "content" too, llama.cpp's key)."""
        body = validate(await read_json(request), DETOKENIZE_SCHEMA)
        card = await self.engine.card()
        check_model(body.get("model"), card, await self.engine.served_name())
        # As vLLM (the tokenizer's decode): special tokens stay in the text. llama.cpp's /detokenize names it content.
        text = await run_cpu(card.decode, vocab_ids(card, body["tokens"]), False)
        return json_response({"prompt": text, "content": text})
