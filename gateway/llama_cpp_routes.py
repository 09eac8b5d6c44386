"""Gateway process: llama.cpp server's own routes (GET /props, POST /completion), for clients of llama-server."""
from __future__ import annotations

import re
from typing import Optional

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.engine import ChoiceResult, Engine, Usage
from gateway.errors import InvalidRequest, NotImplementedApi, Unavailable, Unsupported
from gateway.http_stream import open_stream, stream_generation
from gateway.llama_cpp_fields import clamp_sampling, content_ids, llama_server_seed, sse_pings, zero_top_p
from gateway.llama_cpp_limits import as_n_predict
from gateway.llama_cpp_samplers import llama_cpp_chain, llama_cpp_defaults
from gateway.llama_cpp_infill import infill_prompt
from gateway.llama_cpp_shape import (MEDIA_MARKER, LlamaCppFramer, LlamaCppShaper, model_ftype, params_json,
                                      response_fields)
from gateway.llama_cpp_slots import slot_entries, task_fields
from gateway.chat_prompt import llama_cpp_template_body
from gateway.control_tokens import unmark
from gateway.offload import run_cpu
from gateway.openai_completion import parse_completion
from gateway.openai_plan import check_model
from gateway.openai_checks import check_prompt_size
from gateway.openai_routes import check_request_template, render_body, rendered_messages
from gateway.openai_sampling import read_sampling
from gateway.stream import sse_event
from gateway.template_caps import template_caps
from gateway.web import json_response, read_json

# llama-server's 503 on each route but its model lists until it can serve (server.cpp middleware_server_state)
LOADING = "Loading model"

# /completion fields that change nothing here (automatic prefix cache, no slots to pick, one model), or that shape the
# answer: return_tokens, response_fields, timings_per_token, return_progress, post_sampling_probs (llama_cpp_chain).
_NO_EFFECT = ("cache_prompt", "id_slot", "timings_per_token", "return_progress", "n_keep", "model", "return_tokens",
              "response_fields", "post_sampling_probs")
# /infill's own fields, read into its prompt.
_INFILL_ONLY = ("input_prefix", "input_suffix", "input_extra")


_TOKEN_ID = re.compile(r"[+-]?[0-9]+")


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mixed(item) -> bool:
    """llama.cpp's one prompt of strings and token ids mixed ([12, "text", 34]): tokenize_mixed reads it."""
    return isinstance(item, list) and any(isinstance(x, str) for x in item) and any(_is_id(x) for x in item)


def _openai_form(prompt) -> bool:
    """A prompt /v1/completions reads as it is: a string, strings, token ids, or lists of token ids (or no list)."""
    if not isinstance(prompt, list) or not prompt:
        return True
    return all(isinstance(x, str) for x in prompt) or all(_is_id(x) for x in prompt) or \
        all(isinstance(x, list) and all(_is_id(y) for y in x) for x in prompt)


def _prompt_string(item, param: str):
    """llama.cpp's prompt object {"prompt_string", "multimodal_data"} as its text; media refused (text-only model)."""
    if not isinstance(item, dict):
        return item
    if not isinstance(item.get("prompt_string"), str):
        raise InvalidRequest("a prompt object needs 'prompt_string', a string", param=param)
    if item.get("multimodal_data"):
        raise Unsupported("multimodal_data is not supported: this server runs a text-only model",
                          param=f"{param}.multimodal_data")
    return item["prompt_string"]


def _plain_prompt(prompt):
    """The prompt with every prompt object (alone, or one of a list of prompts) as its text."""
    if isinstance(prompt, list):
        return [_prompt_string(item, f"prompt[{i}]") for i, item in enumerate(prompt)]
    return _prompt_string(prompt, "prompt")


def _prompt_ids(prompt: list, card) -> list:
    """Every prompt as token ids, for a body whose prompts OpenAI's forms cannot carry (a mixed one, or strings beside
    token lists); strings are size-checked before they are tokenized, as /v1/completions does."""
    out = []
    for i, item in enumerate([prompt] if _mixed(prompt) else prompt):
        parts = item if isinstance(item, list) else [item]
        if not parts or not all(isinstance(x, str) or _is_id(x) for x in parts):
            raise InvalidRequest(f"prompt[{i}] must be a string, token ids, or both mixed", param="prompt")
        for part in parts:
            if isinstance(part, str):
                check_prompt_size(part, card, card.max_context_len, "prompt")
        out.append(content_ids(card, item, True))
    return out


def _seed(value):
    """llama.cpp's seed (llama_server_seed), as the /v1 body states it: -1 for a random one."""
    if not _is_id(value):
        return value
    seed = llama_server_seed(value)
    return -1 if seed is None else seed


def completion_body(body, card) -> dict:
    """The /v1/completions body a llama.cpp /completion body asks for: no output limit unless one is sent, its prompt
    forms (a string, token ids, both mixed, or a list of prompts) as OpenAI's, its sampling ranges clamped."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", param=None)
    if body.get("prompt") is None:
        raise InvalidRequest("'prompt' is a required property", param="prompt", code="missing_required_parameter")
    out = zero_top_p(clamp_sampling(llama_cpp_defaults({key: value for key, value in body.items()
                                                        if key not in _NO_EFFECT}, card)))
    out["prompt"] = _plain_prompt(body["prompt"])
    if not _openai_form(out["prompt"]):
        out["prompt"] = _prompt_ids(out["prompt"], card)
    if "seed" in body:
        out["seed"] = _seed(body["seed"])
    bias = body.get("logit_bias")
    if isinstance(bias, dict):
        # llama.cpp's object form: a key that is a whole integer is a token id, any other a text whose tokens are
        # biased (params_from_json_cmpl: strtol, else common_tokenize), as its [text, bias] pairs are read.
        out["logit_bias"] = [[int(key) if _TOKEN_ID.fullmatch(key) else key, value] for key, value in bias.items()]
    stop = body.get("stop")
    if stop == "" or isinstance(stop, list) and "" in stop:
        # llama.cpp skips an empty stop word (params_from_json_cmpl: `if (!word.empty())`); /v1 refuses it, as vLLM.
        out["stop"] = [word for word in stop if word != ""] if isinstance(stop, list) else None
    if body.get("n_predict") is None and body.get("max_tokens") is None:
        out["max_tokens"] = None
    elif body.get("n_predict") == 0 and not isinstance(body["n_predict"], bool):
        # llama.cpp's n_predict 0: the prompt is read, nothing is generated (answered without a generation here).
        out["n_predict"] = 1
    return out


def _render(body: dict, card) -> str:
    """The chat prompt /v1 chat renders for these fields, as text (a special token's text in a message stays text)."""
    return unmark(rendered_messages(body, card))


def _requested(body: dict) -> int:
    """The output limit the request stated, as llama.cpp's generation_settings echo it (-1: none)."""
    value = body.get("n_predict", body.get("max_tokens"))
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


class LlamaCppRoutes:
    """llama-server's GET /props (the context window, slots and template a llama.cpp client reads before it sends)
    and POST /completion (its own completion shape)."""

    def __init__(self, engine: Engine, config: GatewayConfig, version: str):
        self.engine, self.config = engine, config
        self.build_info = f"sparkinfer {version}"
        engine.snapshot_finished = task_fields   # GET /slots' idle seats state the tasks that ended last

    def register(self, app: web.Application) -> None:
        """Adds llama-server's: /props, /completion(s), /slots, /lora-adapters, /apply-template, /infill, /rerank."""
        app.router.add_get("/props", self.props)
        app.router.add_post("/props", self.set_props)
        app.router.add_post("/completion", self.completion)
        # llama.cpp's /completions is its /completion (its own shape, not OpenAI's: that is /v1/completions).
        app.router.add_post("/completions", self.completion)
        app.router.add_get("/slots", self.slots)
        app.router.add_post("/slots/{id_slot}", self.slot_action)
        app.router.add_get("/lora-adapters", self.lora_adapters)
        app.router.add_post("/lora-adapters", self.set_lora_adapters)
        app.router.add_post("/apply-template", self.apply_template)
        app.router.add_post("/infill", self.infill)
        for path in ("/rerank", "/reranking", "/v1/rerank", "/v1/reranking", "/v2/rerank"):
            app.router.add_post(path, self.rerank)

    async def props(self, request: web.Request) -> web.Response:
        """GET /props: llama.cpp's server properties (default generation settings, n_ctx a request, total_slots, the
        chat template and its capabilities, special tokens)."""
        load = await self.engine.check_loaded(starting=LOADING)
        card = await self.engine.card()
        name = await self.engine.served_name()
        specials = card.special_tokens
        caps = await run_cpu(template_caps, card.chat_template_source)
        # n_ctx is one request's window (llama.cpp's per-slot n_ctx), total_slots the requests that run at once.
        sampling = llama_cpp_chain(read_sampling(llama_cpp_defaults({}, card), card), {}, card.max_context_len)
        params = params_json(sampling, -1, [], False, False)
        # What /v1 chat does with the thinking by default: split into reasoning_content, llama.cpp's "deepseek".
        params["reasoning_format"] = "deepseek" if card.thinks else "none"
        return json_response({
            "default_generation_settings": {"n_ctx": card.max_context_len, "params": params},
            "total_slots": load.max_num_seqs, "model_alias": name, "model_path": card.checkpoint_path,
            "modalities": {"vision": False, "video": False, "audio": False}, "chat_template": card.chat_template_source,
            "chat_template_caps": caps, "media_marker": MEDIA_MARKER, "model_ftype": model_ftype(card),
            "bos_token": specials.get("bos_token", ""), "eos_token": specials.get("eos_token", ""),
            "build_info": self.build_info, "endpoint_slots": True, "endpoint_props": False,
            "endpoint_metrics": True, "is_sleeping": False})

    async def set_props(self, request: web.Request) -> web.Response:
        """POST /props: 501 not_supported, llama.cpp's answer when it runs without --props."""
        # llama.cpp's answer without --props (ERROR_TYPE_NOT_SUPPORTED): the settings are the server's to set.
        raise NotImplementedApi("This server does not support changing global properties.", code="not_supported")

    async def slots(self, request: web.Request) -> web.Response:
        """llama.cpp's GET /slots (on by default there): each seat, its window and whether a request holds it, with the
        task counts of this gateway's running choices and ended ones (gateway.llama_cpp_slots); ?fail_on_no_slot=1 is its 503 while
        every seat is busy."""
        load = await self.engine.check_loaded(starting=LOADING)
        card = await self.engine.card()
        slots = slot_entries(load.max_num_seqs, load.num_running, card.max_context_len, self.engine)
        if request.query.get("fail_on_no_slot") and all(slot["is_processing"] for slot in slots):
            raise Unavailable("no slot available")
        return json_response(slots)

    async def slot_action(self, request: web.Request) -> web.Response:
        """POST /slots/{id}?action=save|restore|erase: 501 not_supported, llama.cpp's answer without --slot-save-path
        (no per-slot cache is kept)."""
        # llama.cpp's answer without --slot-save-path (ERROR_TYPE_NOT_SUPPORTED), and why there is nothing to keep.
        raise NotImplementedApi("This server does not support slots action. It keeps no per-slot prompt cache to save, "
                                "restore or erase (its prefix cache is automatic)", code="not_supported")

    async def lora_adapters(self, request: web.Request) -> web.Response:
        """llama.cpp's GET /lora-adapters: the adapters loaded, [{id, path, scale}]; none here."""
        return json_response([])

    async def set_lora_adapters(self, request: web.Request) -> web.Response:
        """llama.cpp's POST /lora-adapters ([{id, scale}]): an empty list sets nothing; any id is not loaded."""
        body = await read_json(request)
        if not isinstance(body, list):
            raise InvalidRequest("Request body must be an array", param=None)
        if body:
            raise InvalidRequest("invalid adapter id: this server loads no LoRA adapters", param=None)
        return json_response({"success": True})

    async def infill(self, request: web.Request) -> web.StreamResponse:
        """llama.cpp's /infill: its fill-in-the-middle prompt (gateway.llama_cpp_infill), answered as /completion."""
        body = await read_json(request)
        prompt = await run_cpu(infill_prompt, body, await self.engine.card())
        return await self._complete(request, {key: value for key, value in body.items() if key not in _INFILL_ONLY}
                                    | {"prompt": prompt})

    async def rerank(self, request: web.Request) -> web.Response:
        """The rerank paths: 501 not_supported with llama.cpp's words without --reranking, and x-should-retry false."""
        # llama.cpp's words without --reranking (clients match them), and why: no reranker is served.
        raise NotImplementedApi("This server does not support reranking. It runs a generative model only",
                                code="not_supported", headers={"x-should-retry": "false"})

    async def apply_template(self, request: web.Request) -> web.Response:
        """llama.cpp's POST /apply-template: {messages, ...} -> {prompt}, the chat route's rendering (a final assistant
        message continued, as llama.cpp prefills it), nothing run."""
        body = llama_cpp_template_body(render_body(await read_json(request)))
        check_request_template(body, self.config)
        if "messages" not in body:
            raise InvalidRequest("'messages' is a required property", param="messages",
                                 code="missing_required_parameter")
        card = await self.engine.card()
        check_model(body.get("model"), card, await self.engine.served_name())
        return json_response({"prompt": await run_cpu(_render, body, card)})

    async def completion(self, request: web.Request) -> web.StreamResponse:
        """POST /completion and /completions: llama.cpp's own completion (prompt as text, ids or a mix), answered or
        streamed in its shape."""
        return await self._complete(request, await read_json(request))

    async def _complete(self, request: web.Request, body) -> web.StreamResponse:
        body = as_n_predict(body)
        card = await self.engine.card()
        # A prompt of no tokens: llama-server answers at once, nothing generated ("empty prompt - releasing slot").
        empty = isinstance(body, dict) and body.get("prompt") == ""
        translated = await run_cpu(completion_body, {**body, "prompt": [0]} if empty else body, card)
        fields = response_fields(body)
        plan = await run_cpu(parse_completion, translated, card, await self.engine.served_name(), read_thinking=False)
        llama_cpp_chain(plan.gen.sampling, body, card.max_context_len)
        return_tokens = bool(body.get("return_tokens"))
        if empty:
            plan.gen.prompt_ids = []
            return await self._prompt_only(request, LlamaCppShaper(plan, card, _requested(body), None, fields),
                                           return_tokens, None)
        if body.get("n_predict") == 0 and not isinstance(body.get("n_predict"), bool):
            return await self._prompt_only(request, LlamaCppShaper(plan, card, 0, None, fields), return_tokens)
        gen = await self.engine.start(plan.gen)
        shaper = LlamaCppShaper(plan, card, _requested(body), gen, fields, timings_per_token=body.get(
            "timings_per_token") is True, return_progress=body.get("return_progress") is True)
        if plan.stream:
            return await stream_generation(request, gen, LlamaCppFramer(shaper),
                                           *sse_pings(body, self.config.sse_keepalive_s))
        results = await self.engine.results(gen)
        return json_response(await run_cpu(shaper.response, results, gen.usage(), return_tokens))

    async def _prompt_only(self, request: web.Request, shaper: LlamaCppShaper, return_tokens: bool,
                           finish: Optional[str] = "length") -> web.StreamResponse:
        """n_predict 0: the prompt checked and counted, nothing generated (stop_type limit), as llama.cpp answers
        (finish None, an empty prompt: stop_type none); streamed, each prompt's final object as its stream's one
        `data:` event, as llama.cpp streams any request."""
        gen = shaper.plan.gen
        results = [ChoiceResult(i, finish_reason=finish) for i in range(gen.num_choices)]
        usage = Usage(prompt_tokens=sum(len(ids) for ids in gen.all_prompt_ids))
        answer = shaper.response(results, usage, return_tokens)
        if not shaper.plan.stream:
            return json_response(answer)
        response = await open_stream(request, LlamaCppFramer.content_type, LlamaCppFramer.headers)
        for final in answer if isinstance(answer, list) else [answer]:
            await response.write(sse_event(final))
        await response.write_eof()
        return response
