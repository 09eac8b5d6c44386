"""Gateway process: Ollama /api/chat and /api/generate bodies -> validated internal GenRequest (OllamaPlan)."""
from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Optional

from gateway import json_out
from gateway.chat import render_chat
from gateway.chat_prompt import checkpoint_template, one_system_message, render_prompt
from gateway.engine import GenRequest
from gateway.errors import ContextLengthExceeded, InvalidRequest, Unsupported
from gateway.model import ModelCard
from gateway.openai_checks import check_tool_schemas
from gateway.ollama_caps import check_capabilities, splits_thinking, think_values
from gateway.ollama_keepalive import parse_keep_alive
from gateway.ollama_messages import no_images, read_messages, read_tools
from gateway.ollama_names import full_name, model_not_found, resolve_model
from gateway.ollama_options import (OllamaOptions, generation_budget, parse_options, template_thinking,
                                    thinking_kwargs)
from gateway.ollama_template import generate_prompt
from gateway.ollama_truncate import fit_history
from gateway.ollama_types import check_go_types, check_runner
from gateway.schema_bounds import lenient, without_stray_required
from gateway.schema_llama_cpp import llama_cpp_schema
from gateway.structured import ANY_OBJECT, check_answer, check_schema, checked, json_constraint
from gateway.tool_grammar import calls_or_json_grammar

@dataclass
class OllamaPlan:
    """A validated Ollama request: what to generate and how to answer."""
    model: str                            # the name as the client sent it (echoed back, as Ollama does)
    gen: Optional[GenRequest] = None      # None: nothing to generate (a load or unload request)
    stream: bool = True
    tools: Optional[list] = None          # tools whose calls are parsed out of the answer (/api/chat)
    want_logprobs: bool = False           # client asked for logprobs
    return_context: bool = False          # /api/generate answers with `context` (prompt + output ids)
    unload: bool = False                  # keep_alive 0 with nothing to generate
    format_schema: Optional[dict] = None  # `format`: the JSON schema the answer must follow ("json": any object)
    keep_alive: Optional[float] = None    # seconds (inf: forever); None: not sent (Ollama's default, 5m)
    render_only: bool = False             # `_debug_render_only`: answer with the rendered prompt, generate nothing
    raw: bool = False                     # /api/generate raw: true (no template, Ollama's generic thinking parser)
    num_ctx: Optional[int] = None         # the window options.num_ctx asks for (clamped); None: an unload's


def _format_schema(value: Any) -> Optional[dict]:
    """Ollama `format`: "json" = any JSON object, an object = that JSON schema; enforced by constrained decoding."""
    if value in (None, ""):
        return None
    if value == "json":
        return ANY_OBJECT
    if not isinstance(value, dict):
        # Ollama's words (llm/llama_server.go): the field's JSON text, Go-quoted.
        text = json_out.dumps(json_out.dumps(value).decode()).decode()
        raise InvalidRequest(f'invalid format: {text}; expected "json" or a valid JSON Schema object', param="format")
    return check_schema(llama_cpp_schema(value), "format")


def _constrain(plan: OllamaPlan, card: ModelCard) -> None:
    if plan.format_schema is None:
        return
    # Keywords the grammar cannot enforce are left unenforced, as Ollama's llama.cpp-built grammar skips them.
    schema = plan.format_schema if plan.format_schema is ANY_OBJECT else lenient(plan.format_schema)
    if not plan.tools:
        plan.gen.constraint = json_constraint(schema, plan.gen.thinking_open, card, "format")
        return
    # As response_format with tools on /v1: a tool call, or JSON for the format.
    check_answer(schema, card, "format")
    tools = [_grammar_tool(tool, card) for tool in plan.tools]
    grammar = calls_or_json_grammar(tools, True, schema, plan.gen.thinking_open, card, lenient=True)
    plan.gen.constraint = checked(grammar, card, "format")


def _grammar_tool(tool: dict, card: ModelCard) -> dict:
    """The tool as the grammar beside a format reads it (Ollama enforces no tool schema: its grammar is the format's):
    a `required` that is no list ignored, as in the format itself, and parameters the calls grammar cannot hold (an
    empty enum, an unknown type, a $ref to nothing) left unchecked: their names, any value."""
    parameters = tool["function"].get("parameters")
    if not isinstance(parameters, dict):
        return tool
    function = {**tool["function"], "parameters": without_stray_required(parameters)}
    try:
        check_tool_schemas([{**tool, "function": function}])
        checked(calls_or_json_grammar([{**tool, "function": function}], True, ANY_OBJECT, False, card, lenient=True),
                card, "format")
    except InvalidRequest:
        names = parameters.get("properties") if isinstance(parameters.get("properties"), dict) else {}
        function["parameters"] = {"type": "object", "properties": {name: {} for name in names}}
    return {**tool, "function": function}


def _logprobs(body: dict) -> Optional[int]:
    """The number of alternatives per token, None without logprobs: true. As Ollama: top_logprobs outside [0, 20] is
    its 400, and top_logprobs without logprobs is ignored (its runner asks for no probabilities then)."""
    top = body.get("top_logprobs")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int)):
        raise InvalidRequest("top_logprobs must be an integer", param="top_logprobs")
    if top is not None and not 0 <= top <= 20:
        raise InvalidRequest("top_logprobs must be between 0 and 20", param="top_logprobs")
    return (top or 0) if body.get("logprobs") else None


def _encode(card: ModelCard, text: str, options: OllamaOptions, num_context: int = 0) -> list:
    """The prompt ids; a prompt too many bytes to fit the window is refused before tokenizing."""
    at_least = num_context + card.min_prompt_tokens(text)
    if at_least >= options.num_ctx:
        raise ContextLengthExceeded(
            f"the prompt is at least {at_least} tokens, which exceeds the context window of {options.num_ctx} "
            f"tokens; it was not truncated. Shorten the prompt or raise options.num_ctx", param="options.num_ctx")
    return card.encode(text)


def _fits(card: ModelCard, text: str, options: OllamaOptions) -> bool:
    """Whether the prompt leaves a token of the window to generate (what _encode refuses otherwise)."""
    return card.min_prompt_tokens(text) < options.num_ctx and len(card.encode(text)) < options.num_ctx


def _gen_request(prompt_ids: list, text: str, options: OllamaOptions, split: bool) -> GenRequest:
    gen = GenRequest(req_id=f"ollama-{secrets.token_hex(12)}", prompt_ids=prompt_ids,
                     max_tokens=generation_budget(len(prompt_ids), options), sampling=options.sampling,
                     stop=options.stop)
    gen.split_reasoning = split
    gen.stop_in_reasoning = True   # its runner's FindStop reads the raw output, before the thinking is split off
    # Thinking on: the template's generation prompt already opened <think>.
    gen.thinking_open = split and text.rstrip().endswith("<think>")
    return gen


def _common(body: dict, card: ModelCard, served_name: str,
            struct: str) -> tuple[OllamaPlan, Optional[OllamaOptions], Optional[int]]:
    """The checks both endpoints share, on a body check_go_types read; returns (plan without gen, options, number of
    top logprobs or None); options None for an unload, which reads nothing more."""
    # Part of the decode, as api.ThinkValue.UnmarshalJSON checks it: an unload gets it too.
    thinking_kwargs(body.get("think"))
    # Checked before the model, as Ollama's handlers do; check_go_types typed stream (absent: streams, as Ollama).
    top = _logprobs(body)
    check_runner(body.get("runner"))
    # No model named: generate's 404 fallback, chat's 400 (server/routes.go, after parseAndValidateModelRef).
    missing = model_not_found if struct == "GenerateRequest" else None
    plan = OllamaPlan(model=resolve_model(body, card, served_name, missing=missing),
                      stream=body.get("stream") is not False)
    plan.keep_alive = parse_keep_alive(body.get("keep_alive"))
    plan.unload = plan.keep_alive == 0
    if plan.unload and not body.get("messages" if struct == "ChatRequest" else "prompt"):
        # An unload: Ollama's handlers answer it once the model is found, before they read the format, the options,
        # the tools, think or raw (server/routes.go ChatHandler, GenerateHandler: expireRunner, done_reason unload).
        return plan, None, top
    plan.render_only = bool(body.get("_debug_render_only"))
    options = parse_options(body.get("options"), card)
    plan.num_ctx = options.num_ctx
    plan.want_logprobs = top is not None
    return plan, options, top


def _render(card: ModelCard, messages: list, tools: Optional[list], think: Any) -> str:
    if card.template is None:
        raise Unsupported("this model has no chat template; use /api/generate with raw: true", param="messages")
    last = messages[-1]
    if last["role"] == "assistant" and not last.get("tool_calls"):
        # Ollama continues a final assistant message (a prefill, ollama/ollama#6778 and #5775) instead of opening
        # a new turn after it: the turn is left open and the answer is the continuation (after the thinking of one
        # with only thinking or nothing, as Ollama's Qwen3.5 renderer leaves any final assistant message open:
        # model/renderers/qwen35.go, prefill := lastMessage && message.Role == "assistant").
        return render_prompt({"messages": messages, "continue_final_message": True}, card, tools,
                             template_thinking(think, card), open_empty=True)
    return render_chat(checkpoint_template(card, tools), messages, card.protect_text, tools=tools,
                       add_generation_prompt=True, **card.special_tokens, **template_thinking(think, card))


def _check_count(body: Any, name: str, ctx: int) -> None:
    """Every message and every tool renders to at least one token (tools are never truncated away): a list of at
    least `ctx` of them is refused before its items are type-checked and rendered (100 000 tools took 36 s to)."""
    items = body.get(name) if isinstance(body, dict) else None
    if isinstance(items, list) and len(items) >= ctx:
        raise ContextLengthExceeded(f"the prompt is at least {len(items)} tokens ({len(items)} {name}), which exceeds "
                                    f"the context window of {ctx} tokens; it was not truncated. Shorten the prompt "
                                    f"or raise options.num_ctx", param=name)


def parse_chat(body: Any, card: ModelCard, served_name: str) -> OllamaPlan:
    """Validates an /api/chat body and renders + tokenizes its prompt; no messages = a load request."""
    if isinstance(body, dict) and body.get("messages"):
        # num_ctx is at most the model's context: more tools than that cannot fit whatever the options say (a load
        # or an unload, without messages, renders nothing).
        _check_count(body, "tools", card.max_context_len)
    body = check_go_types(body, "ChatRequest")
    plan, options, num_logprobs = _common(body, card, served_name, "ChatRequest")
    if options is None:
        return plan
    messages = body.get("messages") or []
    if messages:
        _check_count(body, "tools", options.num_ctx)
    plan.tools = read_tools(body.get("tools"))
    check_capabilities(body.get("think"), plan.tools, card, plan.model, served_name)
    if not messages:
        return plan
    plan.format_schema = _format_schema(body.get("format"))
    truncate = body.get("truncate") is True
    if not truncate:
        _check_count(body, "messages", options.num_ctx)
    messages = one_system_message(read_messages(messages))
    if truncate:
        messages = fit_history(messages, lambda kept: _fits(card, _render(card, kept, plan.tools, body.get("think")),
                                                            options), options.num_ctx - 1)
    text = _render(card, messages, plan.tools, body.get("think"))
    try:
        plan.gen = _gen_request(_encode(card, text, options), text, options,
                                split=splits_thinking(body.get("think"), card))
    except ContextLengthExceeded as error:
        if truncate:
            # The history was cut (truncate: true) and the rest, the last message at least, still does not fit.
            error.message = error.message.replace("it was not truncated. Shorten the prompt", "the oldest messages "
                                                  "were left out (truncate: true) and the rest still does not fit. "
                                                  "Shorten the last message")
        raise
    plan.gen.num_logprobs = num_logprobs
    _constrain(plan, card)
    return plan


def _context_ids(context: Any, card: ModelCard) -> list:
    if context is None:
        return []
    if not isinstance(context, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in context):
        raise InvalidRequest("context must be a list of token ids", param="context")
    if any(t < 0 or t >= card.tokenizer_vocab_size for t in context):
        raise InvalidRequest(f"context token ids must be in [0, {card.tokenizer_vocab_size})", param="context")
    return list(context)


def _system(body: dict, context: list) -> str:
    """The system prompt ("" for none); as Ollama, raw mode refuses one and a context (a system prompt needs the
    template, and raw mode returns no context to send back), in its words. Empty ones (clients send "" and []) pass."""
    system, template = body.get("system"), body.get("template")
    if body.get("raw") and (system or context or template):
        raise InvalidRequest("raw mode does not support template, system, or context",
                             param="system" if system else "context" if context else "template")
    return system or ""


def _generate_text(body: dict, card: ModelCard, prompt: str, system: str) -> str:
    if body.get("raw"):
        return prompt
    if body.get("template"):
        return generate_prompt(body["template"], system, prompt, think_values(body.get("think"), card.thinks),
                               card.protect_text)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return _render(card, messages, None, body.get("think"))


def _splits_reasoning(body: dict, card: ModelCard) -> bool:
    """splits_thinking for /api/generate; with raw: true only when `think` asks for it, as Ollama parses a raw
    answer's thinking then."""
    think = body.get("think")
    if not body.get("raw"):
        return splits_thinking(think, card)
    return think is not None and splits_thinking(think, card)


def parse_generate(body: Any, card: ModelCard, served_name: str) -> OllamaPlan:
    """Validates an /api/generate body (system, raw, think, context, template honoured; suffix/images refused)."""
    body = check_go_types(body, "GenerateRequest")
    plan, options, num_logprobs = _common(body, card, served_name, "GenerateRequest")
    if options is None:
        return plan
    check_capabilities(body.get("think"), None, card, plan.model, served_name)
    prompt = body.get("prompt") or ""
    if body.get("suffix"):
        # Ollama's capability check in its words: the model has no fill-in-the-middle template.
        raise Unsupported(f"{full_name(served_name)} does not support insert", param="suffix")
    system = _system(body, body.get("context"))
    if not prompt:
        # Ollama answers an empty prompt with a load (or, with keep_alive 0, an unload), whatever context, images or
        # format it carries: its handler reads them only for a prompt (server/routes.go GenerateHandler).
        return plan
    no_images(body.get("images"), "images")
    context = _context_ids(body.get("context"), card)
    plan.format_schema = _format_schema(body.get("format"))
    text = _generate_text(body, card, prompt, system)
    plan.gen = _gen_request(context + _encode(card, text, options, len(context)), text, options,
                            split=_splits_reasoning(body, card))
    # As Ollama documents it, raw mode returns no context (a templated one would not continue a raw prompt).
    plan.raw = body.get("raw") is True
    plan.return_context = not plan.raw
    # The sampled ids come back with their logprobs; `context` needs them even when the client did not ask.
    plan.gen.num_logprobs = 0 if num_logprobs is None and plan.return_context else num_logprobs
    _constrain(plan, card)
    return plan
