"""Gateway process: an LM Studio /api/v1/chat body -> the /v1/chat/completions body the OpenAI parser takes.

LM Studio 0.4's native chat (docs: lmstudio.ai/docs/developer/rest/chat): `input` (a string, or text and image items)
is one user turn, `system_prompt` the system turn; its sampling fields, max_output_tokens and `reasoning` map onto
the OpenAI ones; any other key is LM Studio's 400. A chat continued with `previous_response_id` puts its earlier turns
(gateway.response_threads) between the system prompt and the new input. Integrations (plugins, MCP servers) and
image input are 400s naming what is not supported.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from gateway import json_out
from gateway.effort_tiers import nearest_tier
from gateway.engine import GenRequest
from gateway.errors import IMAGES_UNSUPPORTED, ApiError, ContextLengthExceeded, InvalidRequest, Unsupported, renamed
from gateway.lmstudio_shape import context_overflow_message
from gateway.lmstudio_v1_shape import reasoning_options
from gateway.response_threads import Thread
from gateway.model import ModelCard
from gateway.llama_cpp_fields import zero_top_p
from gateway.schema_validate import integral

# LM Studio's `reasoning` -> the OpenAI body's thinking switches.
REASONING = {"off": {"enable_thinking": False}, "on": {"enable_thinking": True},
             "low": {"reasoning_effort": "low"}, "medium": {"reasoning_effort": "medium"},
             "high": {"reasoning_effort": "high"}}
# Fields that carry over under the same name, and the ones LM Studio names its own way.
_SAME = ("temperature", "top_p", "top_k", "min_p")
_RENAMED = {"repeat_penalty": "repetition_penalty", "max_output_tokens": "max_tokens"}
_TEXT_ITEMS = ("message", "text")
# Every field of LM Studio's /api/v1/chat body (its docs' request body). Its server validates the body strictly: any
# other key is a 400 "Unrecognized key(s) in object: 'stop'" (zod's words), which clients look for to drop the key
# and retry; served here, such a key was ignored, so a body LM Studio refuses ran with the field unapplied.
FIELDS = frozenset({"model", "input", "system_prompt", "integrations", "stream", "temperature", "top_p", "top_k",
                    "min_p", "repeat_penalty", "max_output_tokens", "reasoning", "context_length", "store",
                    "previous_response_id"})
# The chat route's field names in its errors -> this API's, which has `input` (the system prompt and the user's turn
# are its messages) and `max_output_tokens`, no `messages` or `max_tokens`.
_RENAMES = [(re.compile(r"\bmessages(\[\d+\](\.[\w.\[\]]*)?|(?![\w )]))"), "input"),
            (re.compile(r"\bmax_(completion_)?tokens\b"), "max_output_tokens"),
            (re.compile(r"\brepetition_penalty\b"), "repeat_penalty")]


def _required(body: dict, name: str) -> Any:
    if body.get(name) is None:
        raise InvalidRequest(f'"{name}" is required', param=name, code="missing_required_parameter")
    return body[name]


def _input_parts(value: Any) -> list:
    """The user turn's text parts; an image item is a 400 (this model has no vision input)."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if not isinstance(value, list) or not value:
        raise InvalidRequest('"input" must be a string or a non-empty array of input items', param="input")
    parts = []
    for i, item in enumerate(value):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "image":
            raise Unsupported(IMAGES_UNSUPPORTED, param=f"input[{i}]")
        if kind not in _TEXT_ITEMS or not isinstance(item.get("content"), str):
            # LM Studio's server takes "text" ("Invalid discriminator value. Expected 'text' | 'image'",
            # lmstudio-ai/docs#253); its docs write "message", read the same here.
            raise InvalidRequest(f'input[{i}] must be {{"type": "text", "content": "<text>"}} (or type "message", as '
                                 f'LM Studio\'s docs write it)',
                                 param=f"input[{i}]")
        parts.append({"type": "text", "text": item["content"]})
    return parts


def check_keys(body: dict, fields: frozenset = FIELDS) -> None:
    """LM Studio's strict body check: a key its body does not take is its 400."""
    unknown = [key for key in body if key not in fields]
    if unknown:
        raise InvalidRequest("Unrecognized key(s) in object: " + ", ".join(f"'{key}'" for key in unknown),
                             param=unknown[0], code="unrecognized_keys")


def _check_types(body: dict) -> None:
    integrations = body.get("integrations")
    if integrations is not None and not isinstance(integrations, list):
        raise InvalidRequest('"integrations" must be an array', param="integrations")
    if integrations:
        raise Unsupported("integrations (plugins, MCP servers) are not supported by this server", param="integrations")
    for name, kind in (("store", bool), ("stream", bool), ("system_prompt", str)):
        if body.get(name) is not None and not isinstance(body[name], kind):
            raise InvalidRequest(f'"{name}" must be a {"boolean" if kind is bool else "string"}', param=name)
    check_positive_int(body, "context_length")


def check_positive_int(body: dict, name: str) -> None:
    """400 naming `name` unless body[name] is absent, null or a positive integer. A whole float (2.0, 4096.0, 1e3) is
    that integer: LM Studio's server reads JSON as JavaScript does (JSON.parse gives 2.0 as the number 2) and checks it
    with zod's int(), which takes any number for which Number.isInteger holds."""
    value = integral(body.get(name), {"type": "integer"})
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidRequest(f'"{name}" must be a positive integer', param=name)


def _check_renamed(body: dict) -> None:
    """The fields LM Studio names its own way, checked under their own names (the OpenAI parser would name its)."""
    check_positive_int(body, "max_output_tokens")
    penalty = body.get("repeat_penalty")
    if penalty is not None and (isinstance(penalty, bool) or not isinstance(penalty, (int, float))
                                or not 0 < penalty <= 10):
        raise InvalidRequest(f'"repeat_penalty" must be a number in (0, 10], got '
                             f'{json_out.dumps(penalty).decode()}', param="repeat_penalty")


def _reasoning(value: Any, card: ModelCard) -> dict:
    """The template's thinking switches for `reasoning`; low / medium / high as the template's nearest effort tier
    (Qwen3.8's template has xhigh, medium and low: "high" is its xhigh)."""
    if value is None:
        return {}
    if not isinstance(value, str) or value not in REASONING:
        raise InvalidRequest(f'"reasoning" must be one of {", ".join(REASONING)}', param="reasoning")
    switches = dict(REASONING[value])
    if "reasoning_effort" in switches:
        switches["reasoning_effort"] = nearest_tier(card, switches["reasoning_effort"])
    return switches


def openai_chat_body(body: Any, card: ModelCard, thread: Optional[Thread] = None) -> dict:
    """The /v1/chat/completions body for an /api/v1/chat one (checked here for what the OpenAI parser cannot): the
    system prompt (the request's, else the one the continued chat had), the chat's earlier turns, the new input."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    model = _required(body, "model")
    parts = _input_parts(_required(body, "input"))
    check_keys(body)
    _check_types(body)
    _check_renamed(body)
    thread = thread or Thread()
    system = system_prompt(body, thread)
    messages = [{"role": "system", "content": system}] if system else []
    out = {"model": model, "messages": messages + thread.messages + [{"role": "user", "content": parts}],
           "stream": bool(body.get("stream")), **_reasoning(body.get("reasoning"), card)}
    out.update({name: body[name] for name in _SAME if body.get(name) is not None})
    out.update({new: body[old] for old, new in _RENAMED.items() if body.get(old) is not None})
    return zero_top_p(out)


def system_prompt(body: dict, thread: Thread) -> Optional[str]:
    """The system prompt a chat runs with: the request's, else the one of the chat it continues."""
    return body.get("system_prompt") or thread.system_prompt


def fit_window(gen: GenRequest, context_length: Optional[int], card: ModelCard) -> None:
    """LM Studio's `context_length`: the window the chat runs in (the model's own when larger). As LM Studio answers
    a prompt that does not fit the loaded context, that is a 400 in its words, and the output stops where the window
    is full."""
    if context_length is None:
        return
    window = min(int(context_length), card.max_context_len)
    num_prompt = len(gen.prompt_ids)
    if num_prompt >= window:
        raise ContextLengthExceeded(context_overflow_message(num_prompt, window),
                                    param="context_length").counts(window, num_prompt)
    gen.max_tokens = min(gen.max_tokens, window - num_prompt)


def check_reasoning(body: dict, card: ModelCard) -> None:
    """As LM Studio answers it: a model without a reasoning mode takes no `reasoning` setting ("off" included), and
    one takes only the settings its chat template honours (its capabilities.reasoning.allowed_options)."""
    setting, allowed = body.get("reasoning"), reasoning_options(card)
    if setting is not None and not allowed:
        raise InvalidRequest(f"Model '{body['model']}' does not expose reasoning configuration.", param="reasoning")
    if setting is not None and setting not in allowed:
        raise InvalidRequest(f"Reasoning setting '{setting}' is not supported by model '{body['model']}'. Supported "
                             f"settings: {', '.join(repr(option) for option in allowed)}.", param="reasoning")


def as_sent(exc: ApiError) -> ApiError:
    """exc with the chat route's field names (in its param and message) replaced by this API's."""
    return renamed(exc, _RENAMES)
