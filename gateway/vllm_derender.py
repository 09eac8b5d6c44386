"""Gateway process: vLLM's derender routes, POST /v1/chat/completions/derender and POST /v1/completions/derender
(vllm/entrypoints/serve/disagg/protocol.py DerenderChatRequest / DerenderCompletionRequest): the token ids an
/inference/v1/generate answer holds turned into the chat.completion or text_completion the request would have got,
through the same detokenizer, stop strings, reasoning split and tool-call parsing as the generation routes, nothing
generated. The last step of vLLM's scale-out flow (render, /inference/v1/generate, derender); both routes were a 404.
Only the whole-answer form is served: the streamed one (a chunk and the client-carried stream_state) is a 400."""
from __future__ import annotations

import uuid

from aiohttp import web

from gateway.completion_shape import completion_response
from gateway.config import GatewayConfig
from gateway.engine import Engine
from gateway.errors import InvalidRequest, Unsupported
from gateway.gen_request import ChoiceResult, Usage
from gateway.list_limits import MAX_PROMPTS
from gateway.offload import run_cpu
from gateway.openai import parse_chat
from gateway.openai_completion import parse_completion
from gateway.openai_plan import check_model
from gateway.openai_routes import check_request_template
from gateway.openai_shape import ChatShaper
from gateway.pipeline import ChoiceOutput
from gateway.schema_validate import validate
from gateway.web import json_response, read_json
from proto import pb

_CHOICE = {"type": "object", "required": ["token_ids"], "properties": {
    "index": {"type": "integer", "minimum": 0}, "token_ids": {"type": "array", "items": {"type": "integer"}},
    "finish_reason": {"enum": ["stop", "length", "abort", "repetition", None]}}}
_RESPONSE = {"type": "object", "required": ["choices"], "properties": {
    "request_id": {"type": ["string", "null"]}, "choices": {"type": "array", "items": _CHOICE}}}
_COMMON = {"model": {"type": "string"}, "stream": {"type": ["boolean", "null"]}}
CHAT_SCHEMA = {"type": "object", "required": ["model", "generate_response"], "properties": {
    **_COMMON, "generate_response": _RESPONSE, "prompt_tokens": {"type": ["integer", "null"], "minimum": 0},
    "chat_request": {"type": ["object", "null"]}}}
COMPLETION_SCHEMA = {"type": "object", "required": ["model", "generate_responses"], "properties": {
    **_COMMON, "generate_responses": {"type": "array", "minItems": 1, "items": _RESPONSE},
    "prompt_tokens": {"type": ["array", "null"], "items": {"type": "integer", "minimum": 0}},
    "completion_request": {"type": ["object", "null"]}}}
# Without the original request: a one-message chat / a one-token prompt, read as the routes read a plain request.
_STAND_IN_CHAT = {"messages": [{"role": "user", "content": "."}]}


def _checked(body, schema: dict, card) -> dict:
    """The body checked against its schema; the streamed form (stream true: a generate_chunk and the client-carried
    stream_state) is refused first, as it has no generate_response, and so are lists no generate answer holds, before
    the validator walks their every item (gateway.list_limits: 2M ids took it ~50 s)."""
    if isinstance(body, dict) and body.get("stream") is True:
        raise Unsupported("stream: streaming derender (one generate chunk and its stream_state a call) is not "
                          "supported: send the whole generate_response", param="stream")
    if isinstance(body, dict):
        responses = body.get("generate_responses")
        responses = responses if isinstance(responses, list) else [body.get("generate_response")]
        if len(responses) > MAX_PROMPTS:
            raise InvalidRequest(f"'generate_responses' holds {len(responses)} items; at most {MAX_PROMPTS} are "
                                 f"accepted", param="generate_responses")
        for choice in (c for r in responses if isinstance(r, dict) and isinstance(r.get("choices"), list)
                       for c in r["choices"]):
            ids = choice.get("token_ids") if isinstance(choice, dict) else None
            if isinstance(ids, list) and len(ids) > card.max_context_len:
                raise InvalidRequest(f"token_ids holds {len(ids)} ids, more than the model's context of "
                                     f"{card.max_context_len} tokens: no generate answer holds that many",
                                     param="token_ids")
    validate(body, schema)
    return body


def _message(token_ids: list, finish: str, stop_ids: set) -> "pb.GenerateResponse":
    """The scheduler's last message for these ids: the eos / stop id that ended a "stop" choice is its stop_token_id,
    not text, as the scheduler sends it (/inference/v1/generate's token_ids end with it)."""
    stop_id = token_ids[-1] if finish == "stop" and token_ids and token_ids[-1] in stop_ids else -1
    shown = token_ids[:-1] if stop_id >= 0 else token_ids
    return pb.GenerateResponse(token_ids=shown, finish_reason=finish, stop_token_id=stop_id,
                               num_generated_tokens=len(token_ids))


def choice_results(plan, card, choices: list, first_index: int = 0) -> list:
    """Each generate choice run through the routes' text pipeline (ChoiceOutput) as one scheduler message."""
    gen = plan.gen
    gen.num_logprobs = None    # the derendered answer carries text; logprobs stay in the generate response
    stop_ids = set(card.eos_token_ids) | set(gen.stop_token_ids)
    results = []
    for offset, choice in enumerate(sorted(choices, key=lambda c: c.get("index", 0))):
        index = first_index + offset
        # An id the detokenizer cannot read was a 500 (a negative one, or one past the wire's int32); one past the
        # vocabulary decoded to nothing. Refused as /inference/v1/generate refuses a prompt id outside it.
        bad = [t for t in choice["token_ids"] if not 0 <= t < card.tokenizer_vocab_size]
        if bad:
            raise InvalidRequest(f"token id {bad[0]} is outside the vocabulary [0, {card.tokenizer_vocab_size})",
                                 param="token_ids")
        finish = choice.get("finish_reason") or "stop"
        out, result = ChoiceOutput(index, gen, card), ChoiceResult(index)
        delta = out.push(_message(list(choice["token_ids"]), finish, stop_ids), finish)
        if delta is not None:
            result.absorb(delta)
        result.finish_reason = result.finish_reason or finish
        results.append(result)
    return results


def _plain(plan, had_request: bool):
    """A plan read from a stand-in request answers nothing about that request's prompt."""
    plan.prompt.vllm_top = None
    if not had_request:
        plan.return_token_ids = False
    return plan


class VLLMDerenderRoutes:
    """POST /v1/chat/completions/derender, POST /v1/completions/derender."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine, self.config = engine, config

    def register(self, app: web.Application) -> None:
        """Adds vLLM's two derender routes."""
        app.router.add_post("/v1/chat/completions/derender", self.chat)
        app.router.add_post("/v1/completions/derender", self.completions)

    async def chat(self, request: web.Request) -> web.Response:
        """The chat.completion of one generate response, parsed with chat_request's tools and reasoning settings."""
        body = await read_json(request)
        # chat_request is rendered (its prompt's ids): its own chat_template as the chat route gates it.
        check_request_template(body.get("chat_request") if isinstance(body, dict) else None, self.config)
        card, served = await self.engine.card(), await self.engine.served_name()
        return json_response(await run_cpu(_chat_answer, body, card, served))

    async def completions(self, request: web.Request) -> web.Response:
        """The text_completion of one generate response per prompt, its choices numbered across them."""
        body = await read_json(request)
        card, served = await self.engine.card(), await self.engine.served_name()
        return json_response(await run_cpu(_completion_answer, body, card, served))


def _chat_answer(body, card, served: str) -> dict:
    """The derendered chat.completion (on the CPU pool: its ids are read token by token)."""
    body = _checked(body, CHAT_SCHEMA, card)
    check_model(body["model"], card, served)
    chat_request = {key: value for key, value in (body.get("chat_request") or _STAND_IN_CHAT).items()
                    if key not in ("model", "stream", "stream_options")}
    plan = _plain(parse_chat(chat_request, card, served), "chat_request" in body)
    generated = body["generate_response"]
    results = choice_results(plan, card, generated["choices"])
    usage = Usage(body.get("prompt_tokens") or 0, sum(len(c["token_ids"]) for c in generated["choices"]))
    shaper = ChatShaper(plan, card, generated.get("request_id") or f"chatcmpl-{uuid.uuid4().hex}")
    return shaper.response(results, usage)


def _check_choices_per_prompt(responses: list, n: int, num_prompts: int) -> None:
    """A choice's prompt (its echo, its prompt_token_ids) is read at index // n, as /inference/v1/generate answers a
    rendered prompt with n choices: a response with another number of choices got another prompt's echo, or a 500
    (IndexError) past the last prompt."""
    if len(responses) != num_prompts:
        raise InvalidRequest(f"generate_responses has {len(responses)} responses; completion_request has {num_prompts} "
                             "prompts", param="generate_responses")
    for i, generated in enumerate(responses):
        if len(generated["choices"]) != n:
            raise InvalidRequest(f"generate_responses[{i}] has {len(generated['choices'])} choices; completion_request "
                                 f"asks {n} per prompt (n)", param=f"generate_responses[{i}].choices")


def _completion_answer(body, card, served: str) -> dict:
    """The derendered text_completion (on the CPU pool, as _chat_answer)."""
    body = _checked(body, COMPLETION_SCHEMA, card)
    check_model(body["model"], card, served)
    responses, counts = body["generate_responses"], body.get("prompt_tokens")
    if counts is not None and len(counts) != len(responses):
        raise InvalidRequest(f"prompt_tokens length ({len(counts)}) must equal generate_responses length "
                             f"({len(responses)})", param="prompt_tokens")
    completion_request = {key: value for key, value in (body.get("completion_request") or {"prompt": [0]}).items()
                          if key not in ("model", "stream", "stream_options")}
    plan = _plain(parse_completion(completion_request, card, served), "completion_request" in body)
    plan.echo_texts = plan.echo_texts if len(plan.echo_texts) == len(responses) else []
    if plan.echo_texts or plan.return_token_ids:
        _check_choices_per_prompt(responses, plan.gen.n, len(plan.gen.all_prompt_ids))
    results = []
    for generated in responses:
        results += choice_results(plan, card, generated["choices"], len(results))
    usage = Usage(sum(counts or []), sum(len(r.token_ids) for r in results))
    rid = responses[0].get("request_id") or f"cmpl-{uuid.uuid4().hex}"
    return completion_response(plan, card, rid, results, usage)
