"""Gateway process: what the OpenAI chat and completions bodies share: the Plan they become, the model check, and the
common fields (stop, stream_options, min_tokens, sampling, response_format) read into a GenRequest."""
from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Optional

from gateway.engine import GenRequest
from gateway.errors import InvalidRequest, NotFound, Unsupported
from gateway.llama_cpp_clients import speaks_llama_cpp
from gateway.llama_cpp_fields import max_predict_s, min_indent
from gateway.sglang_fields import include_stop
from gateway.model import ModelCard
from gateway.openai_checks import check_min_tokens
from gateway.openai_fields import GUIDED, guided_given
from gateway.openai_sampling import read_sampling
from gateway.repetition_stop import repetition_stop
from gateway.prompt_logprobs import PromptLogprobsPlan
from gateway.structured import response_format_schema


@dataclass
class Plan:
    """A validated request: what to generate and how to shape the answer."""
    gen: GenRequest
    model: str
    stream: bool = False
    include_usage: bool = False
    continuous_usage: bool = False
    echo_texts: list = field(default_factory=list)  # completions echo: prompt text per prompt
    echo_prefix: str = ""                            # chat echo: the final assistant message's text, before the answer
    tools: Optional[list] = None                     # tools whose calls are parsed from the output
    parallel_tool_calls: bool = True
    hide_reasoning: bool = False
    forced_tools: bool = False                       # tool_choice required / named: the output is calls only
    named_tool: bool = False                         # tool_choice names one function: its call finishes "stop"
    only_listed_tools: bool = False                  # allowed_tools: a call to a tool outside `tools` stays text
    prompt: PromptLogprobsPlan = field(default_factory=PromptLogprobsPlan)  # prompt logprobs asked for
    return_token_ids: bool = False                   # vLLM's: prompt_token_ids and token_ids beside the text
    choice_prompt_ids: bool = False                  # SGLang's return_prompt_token_ids: each chat choice's prompt ids
    cached_tokens_details: bool = False              # SGLang's return_cached_tokens_details: sglext beside the choices
    tokens_as_ids: bool = False                      # vLLM's return_tokens_as_token_ids: logprobs name "token_id:<id>"
    legacy_functions: bool = False                   # the deprecated functions: a call comes as function_call
    reasoning_beside_content: bool = False           # llama.cpp's deepseek-legacy: reasoning_content, tags in content
    hold_reasoning: bool = False                     # SGLang's stream_reasoning false: the reasoning in one chunk
    prompt_text: Optional[str] = None                # vLLM's return_prompt_text: the rendered chat prompt
    debug_render: Optional[str] = None               # Ollama's _debug_render_only: the rendered prompt, nothing run


def served(requested: str, card: ModelCard, served_name: str) -> bool:
    """Whether the name is the served id (or another served name), the scheduler's id, 'default', or one of those +
    ':latest', or the
    checkpoint folder as the server was given it (MODEL; a trailing / too): vLLM's served name unless
    --served-model-name replaces it, which clients set up against vLLM send (its --model as given, a path)."""
    names = {served_name, card.model_id, "default", *card.served_aliases}
    if requested in names or requested.removesuffix(":latest") in names:
        return True
    return bool(card.model_path) and requested.rstrip("/") == card.model_path.rstrip("/")


def check_model(requested: Optional[str], card: ModelCard, served_name: str) -> None:
    """404 unless the name is one the served model answers to (served); a missing or empty name means the served
    model (vLLM's _is_model_supported accepts an empty name too), and with SPARKINFER_SKIP_MODEL_NAME_VALIDATION any
    name does (vLLM's VLLM_SKIP_MODEL_NAME_VALIDATION, vllm-project/vllm#34676)."""
    if not requested or card.any_model_name or served(requested, card, served_name):
        return
    error = NotFound(f"The model '{requested}' does not exist. This server serves '{served_name}' "
                     f"(also reachable as 'default').", param="model")
    # The names, for the APIs that word this error otherwise (LM Studio's: lmstudio_shape.lmstudio_error).
    error.requested, error.served_name = requested, served_name
    raise error


def check_body_model(body: dict, card: ModelCard, served_name: str) -> None:
    """check_model for a /v1 body's model, but a llama.cpp client's (one naming llama.cpp's own fields) takes any
    name, as llama-server, which serves the one model it was started with, never reads it."""
    if not speaks_llama_cpp(body):
        check_model(body.get("model"), card, served_name)


def stops(body: dict) -> list:
    """The stop strings; an empty one is vLLM's 400 (SamplingParams._verify_args: it would match at once)."""
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    if any(not s for s in stops):
        raise InvalidRequest("stop cannot contain an empty string.", param="stop")
    return stops


def stream_options(body: dict, force_usage: bool = False) -> tuple[bool, bool, bool]:
    """(stream, include_usage, continuous_usage_stats) of an OpenAI body; stream_options without stream is a 400 as in
    vLLM (null or {} is accepted). force_usage (SPARKINFER_FORCE_INCLUDE_USAGE): both on, as vLLM's
    should_include_usage answers under --enable-force-include-usage."""
    stream = bool(body.get("stream"))
    options = body.get("stream_options")
    if options and not stream:  # as vLLM: an empty object (or null) is accepted without stream
        raise InvalidRequest("stream_options is only allowed when stream is true", param="stream_options")
    options = options or {}
    if force_usage:
        return stream, True, True
    return stream, bool(options.get("include_usage")), bool(options.get("continuous_usage_stats"))


def min_tokens(body: dict, max_tokens: int, name: str) -> int:
    """vLLM's min_tokens (>= 0 by the schema): 400 above an explicit limit, and above the resolved one (a default
    or the room the context leaves), as vLLM's SamplingParams check refuses it against the max_tokens it resolved.
    `name` is the field that set the limit (chat_max_tokens' pick on chat; n_predict or max_tokens on completions,
    which have no max_completion_tokens: there it is an unknown field and limits nothing). A llama.cpp client's
    min_tokens is held at the limit instead: llama-server has no such field and ignores it, and the servers its
    clients' text-completion presets were written for take it as a floor under the limit (SillyTavern sends its
    min_length as min_tokens to every source: its LLaMa-Precise preset's 200 against an 80-token reply was a 400)."""
    value = body.get("min_tokens") or 0
    if speaks_llama_cpp(body):
        return min(value, max_tokens)
    explicit = body.get(name)
    # n_predict -1 is no explicit limit.
    if explicit is not None and 0 <= explicit < value:
        raise InvalidRequest(f"min_tokens ({value}) must be at most {name} ({explicit})", param="min_tokens")
    check_min_tokens(value, max_tokens)
    return value


def priority(body: dict) -> int:
    """vLLM's priority (any integer, 0 unless sent), held to the wire's int32: a value past it orders as its end."""
    return max(-2 ** 31, min(2 ** 31 - 1, int(body.get("priority") or 0)))


def base_gen(body: dict, card: ModelCard, prompt_ids: list, max_tokens: int, prefix: str,
              limit_name: str = "max_tokens") -> GenRequest:
    """The GenRequest fields every OpenAI-style route shares: sampling, stops, stop_token_ids (each below the vocabulary
    size, else InvalidRequest), n, min_tokens against `limit_name`, ignore_eos, skip_special_tokens, time limit,
    llama.cpp's n_indent, cache_salt, priority, vLLM's repetition stop; req_id is `prefix`-<24 hex>."""
    stop_ids = [int(t) for t in body.get("stop_token_ids") or []]
    if any(t >= card.vocab_size for t in stop_ids):
        raise InvalidRequest(f"stop_token_ids must be token ids in [0, {card.vocab_size})", param="stop_token_ids")
    sampling = read_sampling(body, card)
    sampling.min_tokens = min_tokens(body, max_tokens, limit_name)
    return GenRequest(req_id=f"{prefix}-{secrets.token_hex(12)}", prompt_ids=prompt_ids, max_tokens=max_tokens,
                      sampling=sampling, stop=stops(body), stop_token_ids=stop_ids,
                      ignore_eos=bool(body.get("ignore_eos")), n=int(body.get("n") or 1),
                      include_stop=include_stop(body),
                      skip_special_tokens=body.get("skip_special_tokens") is not False, stop_token_logprob=True,
                      max_predict_s=max_predict_s(body), min_indent=min_indent(body),
                      cache_salt=body.get("cache_salt") or "", priority=priority(body),
                      repetition_stop=repetition_stop(body))


def response_schema(body: dict, forced: Optional[str] = None) -> Optional[dict]:
    """The response_format schema (None for text); 400 when guided decoding is combined with it or with forced tool
    calls (`forced` as tool_mode gives it: "" required, a name). Beside tools the model may skip (tool_choice auto,
    none) the guided grammar is the answer's, as vLLM's check_structured_outputs_count refuses only a named choice."""
    schema = response_format_schema(body.get("response_format"))
    guided = next((name for name in GUIDED if guided_given(body, name)), None)
    formatted = schema is not None or (body.get("response_format") or {}).get("type") == "structural_tag"
    if guided and (formatted or forced is not None):
        other = "response_format" if formatted else "tool_choice"
        raise Unsupported(f"{guided} cannot be combined with {other}", param=guided)
    return schema
