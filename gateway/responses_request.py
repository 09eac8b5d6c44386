"""Gateway process: an OpenAI /v1/responses body -> the chat route's body -> its validated Plan (one generation path).

A previous_response_id's conversation, or a `conversation`'s items, are put before the input by the route
(gateway.response_threads, gateway.conversations); whatever else needs something stored on the server (a stored
prompt, vLLM's state carriers) is a 400 that says so, and so is `background`
with `store: false` (a background response is read back by its id); the output items of recent responses are kept
for item_reference items (gateway.responses_items).
Everything else is translated into a /v1/chat/completions body and parsed by the chat route's own parse_chat:
chat template, tools and tool_choice, the reasoning split, structured output, stop strings and limits are that
route's, and so are its errors (their field names translated back to this API's).
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Optional

from gateway.errors import ApiError, ContextLengthExceeded, InvalidRequest, count_past_context, renamed
from gateway.list_limits import check_list_sizes
from gateway.model import ModelCard
from gateway.ollama_truncate import fit_history
from gateway.openai import parse_chat
from gateway.openai_plan import Plan
from gateway.openai_fields import check_fields
from gateway.responses_input import NOT_STORED, continues_final_message, input_messages
from gateway.responses_reasoning import INCLUDE as REASONING_INCLUDE
from gateway.responses_schema import PASSTHROUGH, RESPONSES_SCHEMA
from gateway.responses_tools import chat_tool_choice, chat_tools, placed_tools
from gateway.schema_validate import validate

# Fields that need something stored on the server: what they refer to, and what to send instead.
_INPUT_INSTEAD = "send the whole conversation in `input` instead (earlier output items included)"
_STATEFUL = {"prompt": ("refers to a stored prompt template", "send instructions and input instead"),
             # vLLM's stateless multi-turn (vllm#26934): the earlier turns ride in a signed state carrier (a reasoning
             # item's encrypted_content, "vllm:1:...") of the response passed back, or as Harmony messages.
             "previous_response": ("passes back a response whose history only vLLM's own state carrier holds",
                                   _INPUT_INSTEAD),
             "previous_input_messages": ("are vLLM's Harmony message history", _INPUT_INSTEAD)}
# Chat Completions fields the Responses API renamed: OpenAI refuses each with a pointer to its new name. Taken as
# unknown fields (logged and dropped), the format asked for was not applied (lmstudio-bug-tracker#2403), nor the limit.
_MOVED = {"response_format": "text.format", "max_tokens": "max_output_tokens",
          "max_completion_tokens": "max_output_tokens"}
_SAME_NAME = ("model", "temperature", "top_p", "parallel_tool_calls", "user", "cache_salt", "priority") + PASSTHROUGH
# The chat route's field names in its errors -> this API's, most specific first. A chat message's index is not
# its input item's (instructions and calls are messages too), so only "input" is named.
_PARAM_RENAMES = [(re.compile(r"^messages\b.*"), "input")]
_RENAMES = [(re.compile(r"\bmessages\[\d+\](\.[\w.\[\]]*)?"), "input"),
            (re.compile(r"\bmax_completion_tokens\b"), "max_output_tokens"),
            (re.compile(r"\bresponse_format\.json_schema\.schema\b"), "text.format.schema"),
            (re.compile(r"\bresponse_format(\.json_schema)?\b"), "text.format"),
            (re.compile(r"\breasoning_effort\b"), "reasoning.effort")]
# A chat tool, named by where it stands in the request (ResponsesPlan.tool_paths).
_CHAT_TOOL = re.compile(r"\btools\[(\d+)\](\.function\b)?")
# An allowed_tools entry: its index among the chat route's function entries is not the request's.
_ALLOWED_ENTRY = re.compile(r"\btool_choice\.allowed_tools\.tools\[\d+\](\.function\.name)?")


@dataclass
class ResponsesPlan:
    """A validated Responses request: the chat route's Plan, the request fields the response repeats, the
    namespaced functions ({flat name: (namespace, name)}) whose calls come back with their namespace, and whether
    reasoning items carry their text in encrypted_content (include reasoning.encrypted_content) and in their summary
    (reasoning.summary asked for one); the custom tools' names, whose calls are custom_tool_call items."""
    chat: Plan
    echo: dict
    response_id: str
    namespaces: dict = field(default_factory=dict)
    custom_tools: set = field(default_factory=set)
    encrypted_reasoning: bool = False
    reasoning_summary: bool = False


def _check_stateless(body: dict) -> None:
    """400 for any field that needs something this server does not store, and for a background response that is
    not to be stored (OpenAI's background mode keeps the response to be polled: it needs store true)."""
    for name, (what, instead) in _STATEFUL.items():
        if body.get(name):
            raise InvalidRequest(f"{name} {what}, but {NOT_STORED}: {instead}", param=name,
                                 code="responses_not_stored")
    if body.get("background") is True and body.get("store") is False:
        raise InvalidRequest("background: true needs store: true (a background response is read back by its id, "
                             "and store: false keeps nothing)", param="background")


def _check_moved(body: dict) -> None:
    """OpenAI's 400 for a Chat Completions field this API names otherwise (a null one is absent)."""
    for name, moved_to in _MOVED.items():
        if body.get(name) is not None:
            raise InvalidRequest(f"Unsupported parameter: '{name}'. In the Responses API, this parameter has moved "
                                 f"to '{moved_to}'. Try again with the new parameter.", param=name,
                                 code="unsupported_parameter")


def _response_format(text: Optional[dict]) -> Optional[dict]:
    """text.format as the chat route's response_format (None for plain text)."""
    fmt = (text or {}).get("format") or {"type": "text"}
    if fmt["type"] != "json_schema":
        return {"type": fmt["type"]}
    spec = {key: fmt[key] for key in ("name", "schema", "description", "strict") if fmt.get(key) is not None}
    return {"type": "json_schema", "json_schema": spec}


def chat_body(body: dict, namespaces: dict, tool_paths: list, customs: set) -> dict:
    """The /v1/chat/completions body that asks for what this Responses body asks for (namespaces: filled with the
    namespaced functions offered; tool_paths: with where each chat tool stands in the request; customs: with the
    custom tools' names)."""
    chat = {name: body[name] for name in _SAME_NAME if name in body}
    chat["messages"] = input_messages(body.get("input"), body.get("instructions"))
    if continues_final_message(body.get("input")):
        chat["continue_final_message"] = True
    chat["stream"] = bool(body.get("stream"))
    if body.get("max_output_tokens") is not None:
        chat["max_completion_tokens"] = body["max_output_tokens"]
    chat["tools"], offered, paths, custom_names = chat_tools(placed_tools(body))
    namespaces.update(offered)
    customs.update(custom_names)
    tool_paths.extend(paths)
    # "auto" is the Responses API's default, which it echoes beside an empty tools list: no tools, nothing to choose.
    if body.get("tool_choice") is not None and (chat["tools"] or body["tool_choice"] != "auto"):
        chat["tool_choice"] = chat_tool_choice(body["tool_choice"])
    chat["response_format"] = _response_format(body.get("text"))
    chat["reasoning_effort"] = (body.get("reasoning") or {}).get("effort")
    if "message.output_text.logprobs" in (body.get("include") or []):
        # As vLLM and OpenAI: the answer's logprobs only when include asks; top_logprobs alone is only echoed.
        chat.update(logprobs=True, top_logprobs=body.get("top_logprobs") or 0)
    return chat


def _renamed(exc: ApiError, tool_paths: list) -> ApiError:
    """exc with the chat route's field names (in param and message) replaced by this API's: a chat tool's by where
    that function stands in the request (tools[i] counts hosted tools left out and namespaces too)."""
    def tool_path(match: re.Match) -> str:
        index = int(match.group(1))
        return tool_paths[index] if index < len(tool_paths) else match.group(0)
    for pattern, name in ((_ALLOWED_ENTRY, "tool_choice.tools"), (_CHAT_TOOL, tool_path)):
        exc.message = pattern.sub(name, exc.message)
        exc.param = pattern.sub(name, exc.param) if exc.param else exc.param
    return renamed(exc, _RENAMES, _PARAM_RENAMES)


def _echo(body: dict, plan: Plan) -> dict:
    """The request fields a Response object repeats, with the sampling values actually used."""
    reasoning = body.get("reasoning") or {}
    text = {"format": (body.get("text") or {}).get("format") or {"type": "text"}}
    if (body.get("text") or {}).get("verbosity"):
        text["verbosity"] = body["text"]["verbosity"]
    conversation = body.get("conversation")
    conversation = conversation.get("id") if isinstance(conversation, dict) else conversation
    return {"background": bool(body.get("background")), "instructions": body.get("instructions"),
            "conversation": {"id": conversation} if isinstance(conversation, str) else None,
            "max_output_tokens": body.get("max_output_tokens"),
            "max_tool_calls": body.get("max_tool_calls"), "metadata": body.get("metadata") or {},
            "parallel_tool_calls": plan.parallel_tool_calls,
            "previous_response_id": body.get("previous_response_id"),
            # The caching and safety keys OpenAI's Response repeats (no effect here: one server, its prefix cache).
            **{name: body.get(name) for name in ("prompt_cache_key", "prompt_cache_retention", "safety_identifier")},
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "service_tier": "default", "store": body.get("store") is not False,
            "temperature": plan.gen.sampling.temperature,
            "text": text, "tool_choice": body.get("tool_choice") or "auto",
            "tools": [_echo_tool(tool) for tool in body.get("tools") or []],
            "top_logprobs": body.get("top_logprobs") or 0, "top_p": plan.gen.sampling.top_p,
            "truncation": body.get("truncation") or "disabled", "user": body.get("user")}


def _echo_tool(tool: dict) -> dict:
    """A tool as the Response repeats it: a function tool with every key OpenAI's FunctionTool requires (strict and
    parameters null where the request left them out, as vLLM's echo of its FunctionTool model has them)."""
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return tool
    return {"type": "function", "name": tool.get("name"), "description": tool.get("description"),
            "parameters": tool.get("parameters"), "strict": tool.get("strict"),
            **{key: value for key, value in tool.items() if key not in _FUNCTION_TOOL_KEYS}}


_FUNCTION_TOOL_KEYS = ("type", "name", "description", "parameters", "strict")


def _check_sizes(body: dict, card: ModelCard) -> None:
    """List lengths before the schema walks them: every input item renders to at least one token."""
    check_list_sizes(body, card.max_context_len, chat=True, vocab_size=card.vocab_size)
    items = body.get("input")
    if isinstance(items, list) and len(items) >= card.max_context_len:
        raise ContextLengthExceeded(f"This model's maximum context length is {card.max_context_len} tokens. "
                                    f"However, your input holds {len(items)} items (at least as many tokens). "
                                    f"Please reduce the length of the input.", param="input")


def _without_lone_outputs(messages: list) -> list:
    """messages less the tool results at the start of the kept history (after the system message), whose calls were
    left out: the conversation the model reads then begins with a turn, not with an answer to nothing."""
    start = 1 if messages and messages[0]["role"] == "system" else 0
    end = start
    while end < len(messages) - 1 and messages[end]["role"] == "tool":
        end += 1
    return messages[:start] + messages[end:]


def _truncated_plan(chat: dict, card: ModelCard, parse: Callable[[dict], Plan]) -> Plan:
    """parse(chat) with the oldest input items left out until the prompt (and the requested output) fits the context,
    as OpenAI's truncation "auto" drops items from the beginning of the conversation: the system message
    (instructions, system and developer items) and the newest items are kept, the last one always (alone it may still
    not fit: that 400 then)."""
    plans: dict = {}

    def fits(kept: list) -> bool:
        try:
            plans[len(kept)] = parse({**chat, "messages": kept})
        except ContextLengthExceeded:
            return False
        return True

    kept = fit_history(chat["messages"], fits, card.max_context_len - 1)
    if len(kept) < len(chat["messages"]):
        kept = _without_lone_outputs(kept)
    return plans[len(kept)] if len(kept) in plans else parse({**chat, "messages": kept})


def parse_responses(body: Any, card: ModelCard, served_name: str) -> ResponsesPlan:
    """Validates a /v1/responses body and renders + tokenizes its prompt (CPU work: run it off the loop)."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", code="invalid_type")
    _check_stateless(body)
    _check_moved(body)
    _check_sizes(body, card)
    validate(body, RESPONSES_SCHEMA)
    check_fields(body, RESPONSES_SCHEMA["properties"], chat=True)
    namespaces: dict = {}
    tool_paths: list = []
    customs: set = set()
    chat = chat_body(body, namespaces, tool_paths, customs)
    # Tools, and the functions of namespaces offered flat (Codex declares each MCP server as one), are bounded by the
    # context only.
    parse = partial(parse_chat, card=card, served_name=served_name)
    try:
        plan = _truncated_plan(chat, card, parse) if body.get("truncation") == "auto" else parse(chat)
    except ApiError as exc:
        raise _renamed(exc, tool_paths) from None
    # The engine's id stays our own (unique); vLLM's request_id names the response as given.
    plan.gen.req_id = f"resp_{secrets.token_hex(24)}"
    response_id = body.get("request_id") or plan.gen.req_id
    reasoning = body.get("reasoning") or {}
    return ResponsesPlan(chat=plan, echo=_echo(body, plan), response_id=response_id, namespaces=namespaces,
                         custom_tools=customs,
                         encrypted_reasoning=REASONING_INCLUDE in (body.get("include") or []),
                         reasoning_summary=bool(reasoning.get("summary") or reasoning.get("generate_summary")))


def count_input_tokens(body: Any, card: ModelCard, served_name: str) -> int:
    """The input tokens /v1/responses would count for this body (POST /v1/responses/input_tokens). A prompt past the
    context is counted, as OpenAI counts it: clients ask to learn that it no longer fits. The output limit plays no
    part; a prompt refused for its size before tokenizing (only a lower bound known) stays the 400."""
    if isinstance(body, dict):
        body = {name: value for name, value in body.items() if name not in ("max_output_tokens", "stream")}
    return count_past_context(lambda: parse_responses(body, card, served_name).chat.gen.prompt_ids)
