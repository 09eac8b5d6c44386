"""Gateway process: vLLM's POST /v1/chat/completions/batch, several conversations answered in one chat completion.

As vLLM's OpenAIServingChatBatch (vllm/entrypoints/openai/chat_completion/batch_serving.py): `messages` is a list of
conversations, each rendered and generated as the chat route would with the request's other fields, and the answer
is one chat.completion whose choice i answers conversation i, its usage the sum. Not streamed, no tools and n 1, as
vLLM's BatchChatCompletionRequest refuses them; every conversation is admitted or none is (a 429 of one cancels the
others, as for n > 1).
"""
from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from gateway.engine import Engine
from gateway.errors import ApiError, InvalidRequest, Unsupported
from gateway.list_limits import MAX_PROMPTS
from gateway.offload import run_cpu
from gateway.openai import parse_chat
from gateway.openai_shape import ChatShaper
from gateway.web import json_response

# Fields whose answer has no place in one batch answer (it is per conversation, beside the choices), and the ones
# vLLM's batch request refuses (its check_batch_mode and its tool_choice Literal["none"]).
_PER_PROMPT_ANSWERS = ("prompt_logprobs", "return_prompt_text")


def check_batch(body: Any) -> list:
    """The conversations of a batch body; a 400 naming the field for what a batch cannot do."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", code="invalid_type")
    conversations = body.get("messages")
    if not isinstance(conversations, list) or not conversations:
        raise InvalidRequest("'messages' must be a non-empty list of conversations (each a list of messages)",
                             param="messages", code="invalid_type" if conversations else "empty_array")
    if len(conversations) > MAX_PROMPTS:
        raise InvalidRequest(f"'messages' holds {len(conversations)} conversations; at most {MAX_PROMPTS} are "
                             f"accepted", param="messages")
    for i, conversation in enumerate(conversations):
        if not isinstance(conversation, list) or not conversation:
            raise InvalidRequest(f"messages[{i}] must be a non-empty list of messages (one conversation)",
                                 param=f"messages[{i}]", code="invalid_type")
    for name in ("tools", "functions"):
        if body.get(name):
            raise Unsupported(f"Batch chat completions do not support tool use. Please leave out `{name}`.",
                              param=name)
    if body.get("tool_choice") not in (None, "none"):
        raise Unsupported("Batch chat completions do not support tool use: `tool_choice` can only be \"none\".",
                          param="tool_choice")
    for name in _PER_PROMPT_ANSWERS:
        if body.get(name) not in (None, False, 0):
            raise Unsupported(f"Batch chat completions do not support `{name}`.", param=name)
    return conversations


def _check_plan(plan) -> None:
    """What the body asks for once its fields are read (as vLLM's pydantic reads them: "stream": "true" streams)."""
    if plan.stream:
        raise Unsupported("Batch chat completions do not support streaming. Please set `stream` to false.",
                          param="stream")
    if plan.gen.n != 1:
        raise InvalidRequest("Batch chat completions do not support `n > 1`. Please set `n` to 1.", param="n",
                             code="invalid_value")


def _in_conversation(exc: ApiError, index: int) -> ApiError:
    """exc as raised for one conversation, its `messages` param and words naming it in the whole batch."""
    if exc.param and exc.param.startswith("messages"):
        exc.param = f"messages[{index}]{exc.param[len('messages'):]}"
        exc.message = exc.message.replace("'messages", f"'messages[{index}]", 1)
    return exc


async def _all_or_none(coroutines: list) -> list:
    """Every coroutine's result; if one fails (a 429, a lost scheduler) the others are cancelled and it is raised."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _summed(usages: list) -> dict:
    """The usage objects' numbers added up, nested details too (prompt_tokens_details.cached_tokens, ...)."""
    total: dict = {}
    for usage in usages:
        for key, value in usage.items():
            if isinstance(value, dict):
                total[key] = _summed([total.get(key, {}), value])
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
            else:
                total.setdefault(key, value)
    return total


async def batch_chat(request: web.Request, body: dict, engine: Engine, config, response_id) -> web.Response:
    """Answers a batch body: one choice per conversation, in the conversations' order."""
    conversations = check_batch(body)
    card = await engine.card()
    name = await engine.served_name()
    plans = []
    for index, conversation in enumerate(conversations):
        try:
            plans.append(await run_cpu(parse_chat, {**body, "messages": conversation}, card, name))
        except ApiError as exc:
            raise _in_conversation(exc, index) from None
        # echo's prompt logprobs (vLLM's to_sampling_params asks for them) have no place in one batch answer, as
        # prompt_logprobs: nothing is computed for them.
        plans[-1].prompt.vllm_top = plans[-1].gen.num_prompt_logprobs = None
        _check_plan(plans[0])
    outputs = await _all_or_none([engine.complete(plan.gen) for plan in plans])
    rid = response_id(request, body, "chatcmpl", plans[0].gen.req_id)
    answers = [ChatShaper(plan, card, rid).response(results, usage) for plan, (results, usage) in zip(plans, outputs)]
    choices = []
    for index, answer in enumerate(answers):
        choice = answer["choices"][0]
        choice["index"] = index
        choices.append(choice)
    first = answers[0]
    return json_response({"id": rid, "object": "chat.completion", "created": first["created"],
                          "model": first["model"], "system_fingerprint": first["system_fingerprint"],
                          "choices": choices, "usage": _summed([answer["usage"] for answer in answers])})
