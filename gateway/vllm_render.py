"""Gateway process: vLLM's render routes, POST /v1/chat/completions/render and POST /v1/completions/render
(vllm/entrypoints/serve/render/serving.py ServingRender, routed by vllm/entrypoints/openai/*/api_router.py): a chat or
completions request validated, rendered and tokenized, nothing generated, answered as the tokens-in GenerateRequest
that POST /inference/v1/generate takes (vllm/entrypoints/serve/disagg/protocol.py): {request_id, token_ids, features,
sampling_params, model, stream, stream_options, cache_salt, priority, kv_transfer_params}, one object for a chat, a list
of one per prompt for completions. RL rollout clients (slime's and SkyRL's vLLM renderers) and prefix-aware routers
(llm-d's token producer) render there and post the ids to /inference/v1/generate; both routes were a 404."""
from __future__ import annotations

import json
import uuid

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.engine import Engine
from gateway.errors import Unsupported
from gateway.offload import run_cpu
from gateway.openai import chat_prompt_text, parse_chat
from gateway.openai_checks import null_max_tokens_as_default
from gateway.openai_completion import parse_completion
from gateway.openai_routes import check_request_template
from gateway.repetition_stop import KEYS
from gateway.structured import ANY_OBJECT, response_format_schema
from gateway.web import json_response, read_json

# vLLM's RequestOutputKind: what a streamed request gets each step (DELTA) or only the final output (FINAL_ONLY), as
# its to_sampling_params sets it from `stream`.
_DELTA, _FINAL_ONLY = 1, 2
# The guided-decoding fields a request may send -> the StructuredOutputsParams key vLLM folds them into.
_GUIDED = (("guided_json", "json"), ("guided_regex", "regex"), ("guided_choice", "choice"),
           ("guided_grammar", "grammar"))


def structured_outputs(body: dict):
    """The request's output constraint as vLLM's StructuredOutputsParams (its to_sampling_params: structured_outputs,
    or response_format json_schema / json_object folded in), or None for free text."""
    given = body.get("structured_outputs")
    out = dict(given) if isinstance(given, dict) else {}
    out.update({key: body[name] for name, key in _GUIDED if body.get(name) is not None})
    response_format = body.get("response_format") if isinstance(body.get("response_format"), dict) else None
    if response_format and response_format.get("type") == "structural_tag":
        # vLLM folds the whole structural_tag response_format in as its JSON text.
        out["structural_tag"] = json.dumps(response_format, ensure_ascii=False)
    elif response_format:
        # Read as the generation routes read it (llama.cpp's schema beside the type too): any object is json_object.
        schema = response_format_schema(response_format)
        if schema is not None:
            out.update({"json_object": True} if schema is ANY_OBJECT else {"json": schema})
    return out or None


def sampling_params(body: dict, plan, max_tokens: int) -> dict:
    """vLLM's SamplingParams for the rendered request, from the values the request resolved to (its sampling fields
    over the model's generation_config defaults, the limit up to the room the prompt leaves): the names
    /inference/v1/generate reads, so the rendered request posted there generates what the request would have."""
    gen, sampling = plan.gen, plan.gen.sampling
    constraint = structured_outputs(body)
    if gen.constraint is not None and constraint is None and body.get("thinking_token_budget") is None:
        # A forced or strict tool call's grammar has no SamplingParams field here to carry it.
        raise Unsupported("tool_choice: a tool call's grammar (tool_choice required or named, strict tools) is not "
                          "carried in the rendered sampling_params", param="tool_choice")
    stream = bool(body.get("stream"))
    return {
        "n": gen.n, "presence_penalty": sampling.presence_penalty, "frequency_penalty": sampling.frequency_penalty,
        "repetition_penalty": sampling.repetition_penalty, "temperature": sampling.temperature,
        "top_p": sampling.top_p, "top_k": sampling.top_k, "min_p": sampling.min_p, "seed": sampling.seed,
        "stop": list(gen.stop), "stop_token_ids": list(gen.stop_token_ids), "ignore_eos": gen.ignore_eos,
        "max_tokens": max_tokens, "min_tokens": sampling.min_tokens, "logprobs": gen.num_logprobs,
        "prompt_logprobs": gen.num_prompt_logprobs, "skip_special_tokens": gen.skip_special_tokens,
        "spaces_between_special_tokens": body.get("spaces_between_special_tokens") is not False,
        "include_stop_str_in_output": gen.include_stop, "truncate_prompt_tokens": body.get("truncate_prompt_tokens"),
        "structured_outputs": constraint,
        "logit_bias": {str(token): bias for token, bias in sampling.logit_bias.items()} or None,
        "allowed_token_ids": list(sampling.allowed_token_ids) or None, "bad_words": list(body.get("bad_words") or []),
        "thinking_token_budget": body.get("thinking_token_budget"), "detokenize": True,
        "output_kind": _DELTA if stream else _FINAL_ONLY, "extra_args": None,
        # vLLM's SamplingParams carries the repetition stop as its RepetitionDetectionParams (None: off).
        "repetition_detection": dict(zip(KEYS, gen.repetition_stop)) if any(gen.repetition_stop) else None,
    }


def token_offsets(card, text, token_ids: list):
    """vLLM's token_offsets (return_token_offsets): each token's (start, end) characters in the text it was tokenized
    from, as its renderer asks the fast tokenizer for return_offsets_mapping; None where there is no such text (a
    token-id prompt) or the text's plain encoding is not the prompt's ids (special-token text a message carries is
    tokenized as characters here)."""
    if not isinstance(text, str):
        return None
    encoding = card.tokenizer.encode(text, add_special_tokens=False)
    return [list(pair) for pair in encoding.offsets] if list(encoding.ids) == list(token_ids) else None


def generate_request(body: dict, plan, prefix: str, token_ids: list, max_tokens: int, offsets=None) -> dict:
    """One rendered GenerateRequest: a fresh `chatcmpl-` / `cmpl-` request id, as ServingRender names it; features
    null (text only)."""
    stream = bool(body.get("stream"))
    return {"request_id": f"{prefix}-{uuid.uuid4().hex}", "token_ids": list(token_ids), "token_offsets": offsets,
            "features": None,
            "sampling_params": sampling_params(body, plan, max_tokens), "model": body.get("model"),
            "stream": stream, "stream_options": body.get("stream_options") if stream else None,
            "cache_salt": body.get("cache_salt"), "priority": body.get("priority") or 0, "kv_transfer_params": None}


def render_completion(body: dict, plan, card) -> list:
    """One GenerateRequest per prompt, each with its own limit; echo with max_tokens 0 asks vLLM for one token (its
    to_sampling_params: echo_without_generation), which its completions route then drops."""
    gen = plan.gen
    limits = [gen.max_tokens] + [gen.extra_max_tokens[i] if i < len(gen.extra_max_tokens) else gen.max_tokens
                                 for i in range(len(gen.extra_prompt_ids))]
    prompts = body["prompt"] if isinstance(body["prompt"], list) and isinstance(body["prompt"][0], (str, list)) \
        else [body["prompt"]]
    offsets = [token_offsets(card, text, ids) if body.get("return_token_offsets") else None
               for text, ids in zip(prompts, gen.all_prompt_ids)]
    return [generate_request(body, plan, "cmpl", ids, limit or 1, offset)
            for ids, limit, offset in zip(gen.all_prompt_ids, limits, offsets)]


class VLLMRenderRoutes:
    """POST /v1/chat/completions/render, POST /v1/completions/render."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine, self.config = engine, config

    def register(self, app: web.Application) -> None:
        """Adds vLLM's two render routes."""
        app.router.add_post("/v1/chat/completions/render", self.chat)
        app.router.add_post("/v1/completions/render", self.completions)

    async def chat(self, request: web.Request) -> web.Response:
        """The chat request's GenerateRequest: its rendered prompt's ids and resolved sampling params; errors as
        /v1/chat/completions answers them."""
        body = await read_json(request)
        check_request_template(body, self.config)
        card = await self.engine.card()
        plan = await run_cpu(parse_chat, body, card, await self.engine.served_name())
        offsets = None
        if body.get("return_token_offsets"):
            text = await run_cpu(chat_prompt_text, body, card)
            offsets = await run_cpu(token_offsets, card, text, plan.gen.prompt_ids)
        # On the CPU pool: sampling_params re-reads response_format, whose schema check held the event loop 1.6 s
        # for a 6000-property schema.
        return json_response(await run_cpu(generate_request, body, plan, "chatcmpl", plan.gen.prompt_ids,
                                           plan.gen.max_tokens, offsets))

    async def completions(self, request: web.Request) -> web.Response:
        """The completions request's GenerateRequests, one per prompt; errors as /v1/completions answers them."""
        body = null_max_tokens_as_default(await read_json(request))
        card = await self.engine.card()
        plan = await run_cpu(parse_completion, body, card, await self.engine.served_name())
        # On the CPU pool: 512 prompts' offsets held the event loop ~9 s.
        return json_response(await run_cpu(render_completion, body, plan, card))
