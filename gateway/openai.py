"""Gateway process: OpenAI /v1 request bodies -> validated internal GenRequest (plus response options)."""
from __future__ import annotations

from typing import Optional

from gateway.chat_kwargs import template_kwargs
from gateway.chat_prompt import (check_truncate_size, echo_prefix, lower_roles, render_prompt, text_string_parts,
                                 truncate_prompt_tokens)
from gateway.engine import GenRequest
from gateway.errors import ApiError
from gateway.legacy_functions import legacy_functions, named_as_sent
from gateway.list_limits import check_list_sizes
from gateway.llama_cpp_clients import high_temperature, llama_cpp_ranges
from gateway.llama_cpp_fields import (fold_n_cmpl, reasoning_beside_content,
                                      thinking_in_content)
from gateway.control_tokens import unmark
from gateway.model import ModelCard
from gateway.openai_checks import (chat_max_tokens, check_content, check_function_parameters, check_prompt_size,
                                   check_string_patterns, check_tool_schemas, check_tools, resolve_max_tokens,
                                   tool_constraint)
from gateway.logprob_limits import MAX_LOGPROBS, check_logprob_counts
from gateway.openai_fields import check_fields, guided_constraint
from gateway.openai_plan import Plan, base_gen, check_body_model, response_schema, stream_options
from gateway.openai_schema import CHAT_SCHEMA
from gateway.prompt_logprobs import plan_prompt_logprobs
from gateway.reasoning import (held_reasoning, hides_reasoning, opened_think, prompt_opens_thinking,
                               unseparated_reasoning)
from gateway.schema_validate import validate
from gateway.sglang_fields import choice_prompt_ids
from gateway.structural_tag import is_structural_tag, structural_tag_constraint
from gateway.structured import check_answer, checked, json_constraint
from gateway.thinking_budget import apply_thinking_budget
from gateway.tool_choice import allows_listed_only, function_types, tool_mode
from gateway.tool_grammar import calls_or_json_grammar, strict_calls_grammar



def _json_constraint(body: dict, card: ModelCard, schema: dict, tools: Optional[list], thinking_open: bool):
    """response_format's grammar; with (unforced) tools, a tool call or that JSON, as OpenAI allows."""
    if not tools:
        return json_constraint(schema, thinking_open, card, "response_format")
    check_tool_schemas(tools)
    check_answer(schema, card, "response_format")
    parallel = body.get("parallel_tool_calls") is not False
    grammar = calls_or_json_grammar(tools, parallel, schema, thinking_open, card)
    return checked(grammar, card, "response_format")


def _strict_constraint(body: dict, card: ModelCard, tools: list, thinking_open: bool):
    """tool_choice auto with a strict tool: any answer, but its calls follow the schemas (strict_calls_grammar)."""
    check_tool_schemas(tools)
    grammar = strict_calls_grammar(tools, body.get("parallel_tool_calls") is not False, thinking_open, card)
    if grammar is None:
        return None
    check_string_patterns(tools, card)
    return checked(grammar, card, "tools")


def _shown_tools(body: dict, card: ModelCard) -> Optional[list]:
    """The tools the template renders. tool_choice "none" keeps them in the prompt, as vLLM does since 0.10 (and
    OpenAI: the model knows them, it just may not call them); only their calls are not parsed. vLLM's
    --exclude-tools-when-tool-choice-none (card.exclude_tools_when_none) drops them instead."""
    if card.exclude_tools_when_none and body.get("tool_choice") == "none":
        return None
    return body.get("tools") or None


def parse_chat(body: dict, card: ModelCard, served_name: str, cap_output: bool = False) -> Plan:
    """Validates a /v1/chat/completions body and renders + tokenizes its prompt (CPU work: run it off the loop);
    cap_output: an output limit past the context runs to it (LM Studio's), instead of vLLM's 400."""
    raw, body = body, fold_n_cmpl(llama_cpp_ranges(body))
    check_list_sizes(body, card.max_context_len, chat=True, vocab_size=card.vocab_size)
    body = function_types(text_string_parts(lower_roles(body)))
    legacy = isinstance(body, dict) and body.get("functions") is not None
    body = legacy_functions(body) if isinstance(body, dict) else body
    try:
        plan = _parse_chat_body(body, card, served_name, cap_output)
    except ApiError as exc:
        if not legacy:
            raise
        raise named_as_sent(exc) from None
    plan.legacy_functions = legacy
    # llama.cpp's post_sampling_probs: the logprobs are the sampler chain's, as llama-server's chat answers them.
    plan.gen.sampling.post_sampling = body.get("post_sampling_probs") is True
    high_temperature(raw, plan.gen.sampling)
    return plan


def _parse_chat_body(body: dict, card: ModelCard, served_name: str, cap_output: bool) -> Plan:
    """parse_chat's work on a body whose deprecated functions are translated into tools."""
    stream, include_usage, continuous = _check_chat(body, card, served_name)
    requested, param = chat_max_tokens(body)
    check_truncate_size(body, card.max_context_len, requested or 0, param)
    tools, force = tool_mode(body)
    schema = response_schema(body, force)
    constraint = tool_constraint(body, card, tools, force)
    text, prompt_ids = _chat_prompt(body, card, _shown_tools(body, card), force, requested)
    # Without a limit, generation_config.json's max_new_tokens where it sets one, as vLLM's get_max_tokens takes its
    # default_sampling_params["max_tokens"] (--generation-config auto, the default); LM Studio's (cap_output) has none,
    # nor llama.cpp's n_predict -1 / -2, a limit sent as "none" (llama.cpp reads no generation_config.json).
    default = None if cap_output or param == "n_predict" else card.max_new_tokens
    max_tokens = resolve_max_tokens(requested, len(prompt_ids), card, default, param, "messages", cap_output)
    gen = base_gen(body, card, prompt_ids, max_tokens, "chatcmpl", param)
    if force is not None:
        # The grammar makes the turn the calls alone; a stop string could only cut their markup ("\n", a name).
        gen.stop = []
    _chat_logprobs(body, gen)
    prompt = plan_prompt_logprobs(body, False, stream, chat=True)
    gen.num_prompt_logprobs = prompt.num_prompt_logprobs
    opened = _chat_reasoning(body, gen, text, stream)
    if schema is not None and force is None:
        # Forced tool calls win: the turn is the calls (as OpenAI); otherwise calls (if tools) or the JSON.
        constraint = _json_constraint(body, card, schema, tools, gen.thinking_open)
    elif force is None and is_structural_tag(body):
        constraint = structural_tag_constraint(body, card, gen.thinking_open)
    elif force is None and tools and any(t["function"].get("strict") is True for t in tools):
        constraint = _strict_constraint(body, card, tools, gen.thinking_open)
    guided = guided_constraint(body, card, gen.thinking_open)
    gen.constraint = guided[0] if guided else constraint
    apply_thinking_budget(body, gen, card, calls=bool(tools) and force is None)
    return Plan(gen=gen, model=served_name, stream=stream, include_usage=include_usage,
                continuous_usage=continuous, tools=tools,
                parallel_tool_calls=body.get("parallel_tool_calls") is not False,
                hide_reasoning=gen.hide_reasoning, forced_tools=force is not None, named_tool=bool(force),
                only_listed_tools=allows_listed_only(body),
                prompt=prompt, return_token_ids=bool(body.get("return_token_ids")),
                echo_prefix=echo_prefix(body) + opened,
                choice_prompt_ids=choice_prompt_ids(body, stream),
                cached_tokens_details=bool(body.get("return_cached_tokens_details")),
                reasoning_beside_content=reasoning_beside_content(body, stream),
                hold_reasoning=stream and held_reasoning(body),
                prompt_text=unmark(text) if body.get("return_prompt_text") else None,
                debug_render=unmark(text) if body.get("_debug_render_only") else None,
                tokens_as_ids=bool(body.get("return_tokens_as_token_ids")))


def _check_chat(body: dict, card: ModelCard, served_name: str) -> tuple[bool, bool, bool]:
    """A chat body's schema, fields, model, messages and tools checked, in that order; its stream options."""
    validate(body, CHAT_SCHEMA)
    check_fields(body, CHAT_SCHEMA["properties"], chat=True)
    check_logprob_counts(body, card.vocab_size, chat=True)
    check_body_model(body, card, served_name)
    options = stream_options(body, card.force_include_usage)
    check_messages_and_tools(body)
    return options


def check_messages_and_tools(body: dict) -> None:
    """The chat's 400s for its messages (a content its role needs, a part that is not text) and tools (their list,
    their parameters' JSON Schema); the routes that render a chat body as this route does (/tokenize,
    /apply-template, /v1/score) run them too, so that they refuse what it refuses."""
    check_content(body["messages"])
    check_tools(body.get("tools"))
    check_function_parameters(body.get("tools"))


def prompt_kwargs(body: dict, card: ModelCard, force: Optional[str]) -> dict:
    """The template's variables for a chat request whose tool_choice forces (force, tool_mode's) or not."""
    kwargs = template_kwargs(body, card)
    if force is not None:
        # A forced call is the whole turn: no reasoning first (the prompt ends with an empty think block).
        kwargs["enable_thinking"] = False
    return kwargs


def chat_prompt_text(body: dict, card: ModelCard) -> str:
    """The prompt text /v1/chat/completions renders for a body's messages, tools, tool_choice and template fields
    (/tokenize, /apply-template and /v1/score render it so, so their counts are the chat's prompt_tokens)."""
    force = tool_mode(body)[1]
    return render_prompt(body, card, _shown_tools(body, card), prompt_kwargs(body, card, force))


def _chat_prompt(body: dict, card: ModelCard, shown_tools: Optional[list], force, requested: Optional[int]
                 ) -> tuple[str, list]:
    """(the rendered prompt, its token ids, truncated as truncate_prompt_tokens asks)."""
    text = render_prompt(body, card, shown_tools, prompt_kwargs(body, card, force))
    if body.get("truncate_prompt_tokens") is None:
        check_prompt_size(text, card, card.max_context_len, "messages")
    return text, truncate_prompt_tokens(body, card.encode(text), card.max_context_len - (requested or 0))


def _chat_logprobs(body: dict, gen: GenRequest) -> None:
    """gen.num_logprobs from logprobs + top_logprobs (logprob_limits checked them), or llama.cpp's n_probs (at most the
    MAX_LOGPROBS served)."""
    if body.get("logprobs"):
        gen.num_logprobs = int(body.get("top_logprobs") or 0)
    elif body.get("n_probs"):
        gen.num_logprobs = min(body["n_probs"], MAX_LOGPROBS)


def _chat_reasoning(body: dict, gen: GenRequest, text: str, stream: bool) -> str:
    """How the reasoning is split off and shown (gen's hide_reasoning, thinking_open, split_reasoning); returns the
    <think> the prompt opened where the answer's content begins with it (llama.cpp's raw reasoning), else ""."""
    gen.hide_reasoning = hides_reasoning(body)
    # Thinking on: the template's generation prompt (or a continued final message) left <think> open.
    gen.thinking_open = prompt_opens_thinking(text)
    # llama.cpp's reasoning_format none: the text as written, from the <think> the prompt opened (SGLang's unseparated).
    raw = thinking_in_content(body, stream) or reasoning_beside_content(body, stream)
    gen.split_reasoning = not (raw or unseparated_reasoning(body))
    return opened_think(text) if raw and gen.thinking_open and not body.get("continue_final_message") else ""
