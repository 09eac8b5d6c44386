"""Gateway process: OpenAI /v1/completions request bodies (also llama.cpp's /completion and LM Studio's
/api/v0/completions) -> validated internal GenRequest (plus response options)."""
from __future__ import annotations

from gateway.chat_prompt import check_truncate_size, truncate_prompt_tokens
from gateway.engine import GenRequest
from gateway.errors import InvalidRequest, Unsupported
from gateway.list_limits import check_list_sizes, check_num_choices
from gateway.llama_cpp_clients import high_temperature, llama_cpp_ranges
from gateway.llama_cpp_fields import check_post_sampling, fold_n_cmpl
from gateway.logprob_limits import MAX_LOGPROBS, check_logprob_counts
from gateway.model import ModelCard
from gateway.openai_checks import check_prompt_size, completion_max_tokens, resolve_max_tokens
from gateway.openai_fields import check_fields, guided_constraint
from gateway.openai_plan import Plan, base_gen, check_body_model, min_tokens, response_schema, stream_options
from gateway.openai_schema import COMPLETION_SCHEMA
from gateway.prompt_logprobs import plan_prompt_logprobs
from gateway.reasoning import ids_open_thinking
from gateway.schema_validate import validate
from gateway.structural_tag import is_structural_tag, structural_tag_constraint
from gateway.structured import json_constraint
from gateway.thinking_budget import apply_thinking_budget, reasoning_budget

COMPLETIONS_DEFAULT_MAX_TOKENS = 16   # OpenAI's and vLLM's default for /v1/completions


def _completion_prompts(body: dict, card: ModelCard, max_input: int) -> tuple[list, list]:
    """(ids per prompt, text per prompt) for a string, strings, token ids, or lists of token ids; `max_input` is the
    room for a prompt (the context less the requested output) that truncate_prompt_tokens -1 keeps."""
    prompt = body["prompt"]
    if isinstance(prompt, str):
        prompt = [prompt]
    elif prompt and isinstance(prompt[0], int):
        prompt = [prompt]
    ids_list, texts = [], []
    for item in prompt:
        if isinstance(item, str):
            if body.get("truncate_prompt_tokens") is None:
                check_prompt_size(item, card, card.max_context_len, "prompt")
            ids_list.append(truncate_prompt_tokens(body, card.encode(item), max_input))
            texts.append(item)
        else:
            bad = [t for t in item if t >= card.tokenizer_vocab_size]
            if bad:
                raise InvalidRequest(f"prompt token id {bad[0]} is outside the vocabulary "
                                     f"[0, {card.tokenizer_vocab_size})", param="prompt")
            ids_list.append(truncate_prompt_tokens(body, list(item), max_input))
            # Echoed as vLLM detokenizes a token prompt: special tokens (<|endoftext|>) kept.
            texts.append(card.decode(item, skip_special_tokens=False))
    empty = next((i for i, ids in enumerate(ids_list) if not ids), None)
    if empty is not None:
        # vLLM's words: its protocol's check of a whole prompt "", its engine's of an empty one among several.
        if isinstance(body["prompt"], str):
            raise InvalidRequest("Either prompt or prompt_embeds must be provided and non-empty.", param="prompt")
        raise InvalidRequest("The decoder prompt cannot be empty", param=f"prompt[{empty}]")
    return ids_list, texts


def _completion_num_logprobs(body: dict, default):
    """A completion's logprob count: `logprobs` (OpenAI's legacy integer), else llama.cpp's n_probs, else default."""
    if body.get("logprobs") is not None:
        return int(body["logprobs"])
    # llama.cpp's n_probs past the alternatives served: as many as there are (llama-server's min(n_vocab, n_probs)).
    return min(body["n_probs"], MAX_LOGPROBS) if body.get("n_probs") else default


def _check_unserved_prompts(body: dict) -> None:
    """400s for the prompt forms not served: a suffix (fill in the middle), and vLLM's prompt_embeds, which come
    without a prompt: refused by name before the schema asks for the prompt the client rightly left out (a body that
    is no object is the schema's 400)."""
    if not isinstance(body, dict):
        return
    if body.get("suffix"):
        raise Unsupported("suffix (fill-in-the-middle) is not supported", param="suffix")
    if body.get("prompt") is None:
        check_fields({"prompt_embeds": body.get("prompt_embeds")}, {}, chat=False)


def parse_completion(body: dict, card: ModelCard, served_name: str, cap_output: bool = False,
                     read_thinking: bool = True) -> Plan:
    """Validates a /v1/completions body. max_tokens 0 is allowed only with echo (returns the prompt); cap_output as
    parse_chat's; read_thinking: a constraint starts after a thinking the prompts leave open, as vLLM reads them
    (llama.cpp's and LM Studio's raw completions constrain from the first token)."""
    raw, body = body, fold_n_cmpl(llama_cpp_ranges(body))
    check_post_sampling(body)
    check_list_sizes(body, card.max_context_len, chat=False, vocab_size=card.vocab_size)
    _check_unserved_prompts(body)
    validate(body, COMPLETION_SCHEMA)
    check_num_choices(body)
    check_fields(body, COMPLETION_SCHEMA["properties"], chat=False)
    check_logprob_counts(body, card.vocab_size, chat=False)
    check_body_model(body, card, served_name)
    stream, include_usage, continuous = stream_options(body, card.force_include_usage)
    echo = bool(body.get("echo"))
    requested, param, sent = completion_max_tokens(body, echo)
    # vLLM counts OpenAI's default of 16 when max_tokens is absent (its CompletionRequest default), 0 for null
    # (llama.cpp's and LM Studio's "no limit"; a /v1 client's null is the default, openai_routes).
    output = (requested or 0) if sent else COMPLETIONS_DEFAULT_MAX_TOKENS
    check_truncate_size(body, card.max_context_len, output, param)
    ids_list, texts = _completion_prompts(body, card, card.max_context_len - output)
    # Absent: OpenAI's default of 16; an explicit null: no explicit limit, up to the context.
    default = None if sent else COMPLETIONS_DEFAULT_MAX_TOKENS
    # Each prompt its own limit, as vLLM gives it: without an explicit one, up to the context from that prompt (a
    # short prompt beside a long one got the long one's room).
    limits = [resolve_max_tokens(requested, len(ids), card, default, param, "prompt", cap_output) for ids in ids_list]
    max_tokens = limits[0]
    prompt = plan_prompt_logprobs(body, echo, stream)
    # max_tokens 0 + echo with prompt logprobs: generate one token and drop it (vLLM does the same).
    prompt.prompt_only = max_tokens == 0 and prompt.num_prompt_logprobs is not None
    gen = base_gen(body, card, ids_list[0], 1 if prompt.prompt_only else max_tokens, "cmpl", param)
    gen.num_prompt_logprobs = prompt.num_prompt_logprobs
    gen.extra_prompt_ids = ids_list[1:]
    if any(limit != max_tokens for limit in limits):
        gen.extra_max_tokens = limits[1:]
        gen.sampling.min_tokens = min_tokens(body, min(limits), param)
    gen.num_logprobs = _completion_num_logprobs(body, gen.num_logprobs)
    if read_thinking:
        _completion_thinking(body, card, gen, ids_list)
    else:
        gen.constraint = _completion_constraint(body, card, False)
    high_temperature(raw, gen.sampling)
    return Plan(gen=gen, model=served_name, stream=stream, include_usage=include_usage,
                continuous_usage=continuous, echo_texts=texts if echo else [], prompt=prompt,
                return_token_ids=bool(body.get("return_token_ids")),
                tokens_as_ids=bool(body.get("return_tokens_as_token_ids")),
                cached_tokens_details=bool(body.get("return_cached_tokens_details")))


def _completion_thinking(body: dict, card: ModelCard, gen: GenRequest, ids_list: list) -> None:
    """gen's constraint and thinking budget, after the thinking where every prompt leaves a <think> block open: vLLM
    reads each prompt's ids with its reasoning parser and starts structured output and thinking_token_budget at the
    reasoning end, as on chat. One grammar serves a request's prompts: prompts that differ there are a 400."""
    opens = {ids_open_thinking(ids, card) for ids in ids_list}
    gen.thinking_open = opens == {True}
    gen.constraint = _completion_constraint(body, card, gen.thinking_open)
    apply_thinking_budget(body, gen, card)
    if len(opens) > 1 and (gen.constraint is not None or reasoning_budget(body) is not None):
        raise InvalidRequest("some prompts leave a <think> block open and some do not: structured output and "
                             "thinking_token_budget start after the thinking, so send them in separate requests",
                             param="prompt")


def _completion_constraint(body: dict, card: ModelCard, thinking_open: bool):
    """response_format (json_object / json_schema, as vLLM's completions take it) or vLLM guided decoding."""
    schema = response_schema(body, None)
    if schema is not None:
        return json_constraint(schema, thinking_open, card, "response_format")
    if is_structural_tag(body):
        return structural_tag_constraint(body, card, thinking_open)
    guided = guided_constraint(body, card, thinking_open)
    return guided[0] if guided else None
