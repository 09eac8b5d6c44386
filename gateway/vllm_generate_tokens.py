"""Gateway process: vLLM's tokens-in / tokens-out POST /inference/v1/generate (vllm/entrypoints/serve/disagg: protocol
GenerateRequest / GenerateResponse, serving.ServingTokens), which vLLM's server attaches since 0.20 and RL rollout
clients post to (prime-rl, SkyRL, vime): the prompt as token_ids, vLLM's SamplingParams as sampling_params, the
generated ids back, never text. Run as the /v1/completions request it asks for (a token-id prompt).

Answer: {request_id, choices: [{index, logprobs, finish_reason, token_ids, routed_experts}], prompt_logprobs,
kv_transfer_params}; logprobs are chat-shaped with every token named "token_id:N" (ServingTokens.
_create_tokens_logprobs: the sampled token and at most max(logprobs, 1) alternatives). Streamed: `data:` chunks {request_id, choices: [{index,
logprobs, finish_reason, token_ids: the new ids}], usage} for each piece with ids, a usage chunk with
stream_options.include_usage (per chunk with continuous_usage_stats), then `data: [DONE]`."""
from __future__ import annotations

import re
import time
import uuid

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.engine import Delta, Engine, Usage
from gateway.errors import ApiError, InvalidRequest, renamed
from gateway.http_stream import stream_generation
from gateway.offload import run_cpu
from gateway.openai_completion import parse_completion
from gateway.openai_shape import SSE_HEADERS
from gateway.openai_usage import choice_usage
from gateway.prompt_logprobs import vllm_prompt_logprobs
from gateway.schema_validate import integral
from gateway.stream import SSE_DONE, SseFramer, sse_event
from gateway.web import json_response, read_json

# GenerateRequest's token_ids: list[int] (schema_validate.integral reads its whole floats as ints)
_IDS_SCHEMA = {"type": "array", "items": {"type": "integer"}}

# SamplingParams fields read as /v1/completions reads the same names; the others change nothing here (no text is
# returned: detokenize; the output kind is the route's; extra_args are for custom extensions).
_SAMPLING = ("n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p", "top_k",
             "min_p", "seed", "stop", "stop_token_ids", "ignore_eos", "max_tokens", "min_tokens", "logprobs",
             "prompt_logprobs", "skip_special_tokens", "spaces_between_special_tokens", "include_stop_str_in_output",
             "truncate_prompt_tokens", "structured_outputs", "logit_bias", "allowed_token_ids", "bad_words",
             "thinking_token_budget", "logprob_token_ids", "repetition_detection", "logits_processors",
             "max_repetition_pattern_size", "min_repetition_pattern_size", "repetition_min_count")
_NO_EFFECT = ("detokenize", "output_kind", "extra_args", "skip_clone")
# The /v1/completions fields an error names -> this request's: the prompt is token_ids (where a message quotes it
# too), a sampling field (an item of one too: stop_token_ids[0]) sits under sampling_params.
# GenerateRequest has no echo, so /v1/completions' "0 only with echo" is advice it cannot take: vLLM's
# SamplingParams says "max_tokens must be at least 1, got 0".
_RENAMES = [(re.compile(r"'prompt(?=['\[])"), "'token_ids"), (re.compile(r" \(0 only with echo: true\)"), "")]
_PARAM_RENAMES = [(re.compile(r"^prompt\b"), "token_ids"),
                  (re.compile(rf"^(?=(?:{'|'.join(_SAMPLING)})\b)"), "sampling_params.")]
_REQUEST = ("request_id", "token_ids", "sampling_params", "model", "stream", "stream_options", "cache_salt",
            "priority", "kv_transfer_params", "features")


def completion_body(body) -> dict:
    """The /v1/completions body a GenerateRequest asks for (not streamed: the route frames its own stream)."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", param=None)
    # A whole float (3.0, as torch's float tensors .tolist() them) is its id, as pydantic's lax mode reads
    # GenerateRequest's list[int] and /v1/completions reads a token-id prompt.
    ids = integral(body.get("token_ids"), _IDS_SCHEMA)
    if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        raise InvalidRequest("token_ids must be a list of token ids", param="token_ids")
    if any(t < 0 for t in ids):
        raise InvalidRequest("token_ids must not contain negative values", param="token_ids")
    params = body.get("sampling_params")
    if not isinstance(params, dict):
        raise InvalidRequest("sampling_params is a required object", param="sampling_params")
    # A client that serializes a whole SamplingParams sends every field, most at a default that asks for nothing:
    # only a field outside these names that asks for something (a value, not null / false / 0 / empty) is refused.
    unknown = [key for key, value in params.items() if key not in _SAMPLING and key not in _NO_EFFECT
               and value not in (None, False, 0, "", [], {})]
    if unknown:
        raise InvalidRequest(f"unknown sampling parameter '{unknown[0]}'", param=f"sampling_params.{unknown[0]}")
    if body.get("features"):
        raise InvalidRequest("features (multimodal inputs) are not supported: this server runs a text-only model",
                             param="features")
    # Without max_tokens, up to the room the prompt leaves, as ServingTokens applies get_max_tokens (SamplingParams'
    # own default of 16 would cut every answer).
    out = {"prompt": ids, "max_tokens": None,
           **{key: params[key] for key in _SAMPLING if params.get(key) is not None}}
    out.update({key: body[key] for key in ("model", "cache_salt", "priority", "kv_transfer_params")
                if body.get(key) is not None})
    return out


def _counts(usage: Usage) -> dict:
    """vLLM's UsageInfo counts (its prompt_tokens_details only with --enable-prompt-tokens-details)."""
    return {"prompt_tokens": usage.prompt_tokens, "total_tokens": usage.total_tokens,
            "completion_tokens": usage.completion_tokens}


def _named(token_id: int, logprob: float) -> dict:
    return {"token": f"token_id:{token_id}", "logprob": max(logprob, -9999.0), "bytes": None}


class TokensShaper:
    """One /inference/v1/generate request's answer bodies."""

    def __init__(self, plan, card, request_id: str, num_logprobs):
        self.plan, self.card, self.request_id, self.k = plan, card, request_id, num_logprobs

    def logprobs(self, entries: list):
        """vLLM's logprobs of the tokens route ({"content": [named entry + top_logprobs]}); None unless asked."""
        if self.k is None:
            return None
        content = []
        for entry in entries:
            tops = entry.top[:self.k] if self.k else [(entry.token_id, entry.logprob)]
            content.append({**_named(entry.token_id, entry.logprob), "top_logprobs": [_named(*t) for t in tops]})
        return {"content": content}

    def response(self, results: list, usage: Usage) -> dict:
        """The non-streamed answer: request_id, created, model, choices with token_ids, logprobs and finish_reason,
        usage, prompt logprobs (vLLM's serve_tokens_full_generator sets created, model and usage since its
        GenerateResponse has them; derender clients and RL trainers read the counts there)."""
        choices = [{"index": r.index, "logprobs": self.logprobs(r.logprobs), "finish_reason": r.finish_reason or "stop",
                    "token_ids": list(r.token_ids), "routed_experts": None} for r in results]
        prompt = next((r.prompt_logprobs for r in results if r.prompt_logprobs is not None), None)
        k = self.plan.gen.num_prompt_logprobs
        return {"request_id": self.request_id, "created": int(time.time()), "model": self.plan.model,
                "choices": choices, "usage": _counts(usage), "kv_transfer_params": None,
                "prompt_logprobs": None if k is None else vllm_prompt_logprobs(self.card, prompt or [], k)}


class TokensFramer(SseFramer):
    """SSE framing of a /inference/v1/generate stream (ServingTokens.serve_tokens_stream_generator)."""
    content_type = "text/event-stream; charset=utf-8"
    headers = SSE_HEADERS

    def __init__(self, shaper: TokensShaper, include_usage: bool, continuous: bool):
        self.shaper, self.include_usage, self.continuous = shaper, include_usage, continuous

    def start(self, usage: Usage) -> list[bytes]:
        """Nothing: vLLM's first event carries the first tokens."""
        return []

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """One event with the Delta's token_ids, logprobs and finish_reason (usage on it with
        continuous_usage_stats)."""
        if not delta.token_ids:
            return []
        choice = {"index": delta.index, "logprobs": self.shaper.logprobs(delta.logprobs),
                  "finish_reason": delta.finish_reason, "token_ids": delta.token_ids}
        own = choice_usage(usage, delta.index // self.shaper.plan.gen.n, delta.num_tokens)
        return [sse_event({"request_id": self.shaper.request_id, "choices": [choice],
                           "usage": {**_counts(own), "prompt_tokens_details": None} if self.continuous else None})]

    def end(self, usage: Usage) -> list[bytes]:
        """The usage event (choices []) when include_usage, then [DONE]."""
        final = [sse_event({"request_id": self.shaper.request_id, "choices": [], "usage": _counts(usage)})]
        return (final if self.include_usage else []) + [SSE_DONE]


class VLLMTokensRoutes:
    """POST /inference/v1/generate."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine, self.config = engine, config

    def register(self, app: web.Application) -> None:
        """Adds POST /inference/v1/generate."""
        app.router.add_post("/inference/v1/generate", self.generate)

    async def generate(self, request: web.Request) -> web.StreamResponse:
        """POST /inference/v1/generate: vLLM's token-in token-out generation, answered or streamed."""
        body = await read_json(request)
        translated = completion_body(body)
        card = await self.engine.card()
        try:
            plan = await run_cpu(parse_completion, translated, card, await self.engine.served_name())
        except ApiError as error:
            raise renamed(error, _RENAMES, _PARAM_RENAMES) from None
        given = body.get("request_id")
        request_id = f"generate-tokens-{given if isinstance(given, str) and given else uuid.uuid4().hex}"
        plan.gen.cancel_ids = {request_id: None}
        shaper = TokensShaper(plan, card, request_id, plan.gen.num_logprobs)
        gen = await self.engine.start(plan.gen)
        if body.get("stream"):
            options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
            framer = TokensFramer(shaper, bool(options.get("include_usage")),
                                  bool(options.get("include_usage") and options.get("continuous_usage_stats")))
            return await stream_generation(request, gen, framer, self.config.sse_keepalive_s)
        results = await self.engine.results(gen)
        return json_response(shaper.response(results, gen.usage()))
