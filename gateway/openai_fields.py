"""Gateway process: /v1 fields beyond OpenAI's core: refused ones (400 unsupported), unknown ones (logged once),
and vLLM's guided decoding (guided_* / structured_outputs) mapped onto the worker's grammar Constraint."""
from __future__ import annotations

import json
import re
from typing import Any, Callable, Optional

from llguidance import regex_to_lark
from llguidance.gbnf_to_lark import any_to_lark, is_lark_syntax

from gateway.errors import InvalidRequest, Unsupported
from gateway.llama_cpp_fields import REFUSED as LLAMA_CPP_REFUSED
from gateway.once_log import OnceLog
from gateway.repetition_stop import FIELDS, repetition_stop
from gateway.schema_bounds import lenient
from gateway.schema_llama_cpp import llama_cpp_schema
from gateway.sglang_fields import GUIDED_KINDS as SGLANG_GUIDED_KINDS, REFUSED as SGLANG_REFUSED
from gateway.structured import ANY_OBJECT, Constraint, check_schema, checked, json_constraint, think_prefix

_TEXT_ONLY = "this model server generates text only"


def _nonempty(value: Any) -> bool:
    return value is not None and value != [] and value != {}


# field -> (is the request asking for it?, why it is refused). Each would change the output in vLLM/OpenAI.
REFUSED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "use_beam_search": (lambda v: bool(v), "beam search is not supported"),
    # llama.cpp's mirostat versions (llama-cpp-python's mirostat_mode): 0 off, 1 and 2 run (worker/mirostat.py).
    "mirostat": (lambda v: v not in (None, 0, 1, 2), "mirostat sampling other than versions 1 and 2 is not supported"),
    "mirostat_mode": (lambda v: v not in (None, 0, 1, 2), "mirostat sampling (llama-cpp-python's mirostat_mode) other "
                                                          "than versions 1 and 2 is not supported"),
    "modalities": (lambda v: isinstance(v, list) and any(m != "text" for m in v), _TEXT_ONLY),
    "audio": (lambda v: v is not None, f"audio output is not supported: {_TEXT_ONLY}"),
    # vLLM refuses both unless its server was started for them (--enable-prompt-embeds, --logits-processor-pattern).
    "prompt_embeds": (_nonempty, "prompt embeddings are not supported: send the prompt as text or token ids"),
    "logits_processors": (_nonempty, "custom logits processors are not supported"),
    "logprob_token_ids": (_nonempty, "logprobs of chosen token ids are not supported (top_logprobs are)"),
    "watermarking": (lambda v: bool(v), "watermarked sampling is not supported"),
    **LLAMA_CPP_REFUSED,
    **SGLANG_REFUSED,
}
# Chat only: on /v1/completions these are honoured or checked in parse_completion.
CHAT_REFUSED: dict[str, tuple[Callable[[Any], bool], str]] = {}

# Accepted fields with no effect on the output here (or whose effect is the default).
NO_EFFECT = frozenset({
    "user", "metadata", "store", "service_tier", "spaces_between_special_tokens",
    "request_id", "logprobs", "stream", "parallel_tool_calls", "best_of",
    "functions", "function_call", "keep_alive", "ttl", "truncation", "kv_transfer_params", "vllm_xargs",
    "add_special_tokens", "safety_identifier", "prompt_cache_key", "verbosity",
    "web_search_options", "stream_interval", "session_id", "mm_processor_kwargs", "media_io_kwargs",
    "ec_transfer_params",
    # SGLang's routing, disaggregation and labelling fields (its protocol.py: which data-parallel worker or prefill
    # node serves the request, a cache-isolation key, metric labels, an n-gram speculation corpus) and custom_params
    # (read only by a custom_logit_processor, refused): one server here, the output is the same.
    "extra_key", "routed_dp_rank", "data_parallel_rank", "disagg_prefill_dp_rank", "bootstrap_host", "bootstrap_port",
    "bootstrap_room", "custom_labels", "ngram_corpus_id", "custom_params",
    # Predicted Outputs only speed an answer up (OpenAI: the output is the model's own either way); vLLM, Ollama,
    # llama.cpp and LM Studio ignore it, and Continue sends it on its apply edits to models named gpt-4o or
    # mistral-large, names local servers are often given.
    "prediction",
    # Beam search's length penalty: vLLM reads it only for use_beam_search (to_beam_search_params; its sampling
    # params have none), which is refused above, and SillyTavern sends its slider's value on every text completion.
    "length_penalty",
    # The whitespace JSON may have between tokens: JSON is always written compact here (", " and ": "), and vLLM's
    # default xgrammar backend does not read it either (vllm#26362); LlamaIndex-based extractors send " " beside
    # guided_json, which was a 400 that lost the JSON they asked for.
    "guided_whitespace_pattern",
    # vLLM's char offsets of the prompt's tokens: its render routes answer them (gateway.vllm_render), its
    # generation answers carry none.
    "return_token_offsets",
})
# vLLM's guided decoding fields, then llama.cpp's json_schema and grammar (its /completion options, which its
# OpenAI-compatible routes take too), then SGLang's regex and ebnf.
GUIDED = ("guided_choice", "guided_json", "guided_regex", "guided_grammar", "structured_outputs", "json_schema",
          "grammar", "grammar_string", "regex", "ebnf")
# vLLM's guided_* spellings, deprecated for structured_outputs (vLLM 0.10.2) and no longer read since (0.12).
_VLLM_DEPRECATED = ("guided_choice", "guided_json", "guided_regex", "guided_grammar")
_GUIDED_KINDS = (("choice", "guided_choice"), ("json", "guided_json"), ("regex", "guided_regex"),
                 ("grammar", "guided_grammar"), ("json", "json_schema"), ("grammar", "grammar"),
                 ("grammar", "grammar_string"), *SGLANG_GUIDED_KINDS)
HONOURED = frozenset({
    *GUIDED, "include_stop_str_in_output", "skip_special_tokens", "add_generation_prompt", "continue_final_message",
    "logit_bias_type", "chat_template", "truncate_prompt_tokens", "guided_decoding_backend", "prompt_logprobs",
    "return_token_ids",
    "include_reasoning", "echo", "typical_p", "n_predict", "n_probs", "repeat_last_n", "return_tokens_as_token_ids",
    "t_max_predict_ms", "no_stop_trim", "truncation_side", "timings_per_token", "return_progress", "cache_salt",
    "priority",
})
# structural_tag: gateway.structural_tag builds its grammar (counted here, so that it is one kind of several).
_OUTPUT_KINDS = ("choice", "json", "regex", "grammar", "json_object", "structural_tag")
_STRING, _FLAG = {"type": ["string", "null"]}, {"type": ["boolean", "null"]}
# structured_outputs typed as vLLM's StructuredOutputsParams types it (sampling_params.py); a value of another type
# was read as absent ({"json": 0}, {"choice": 0} gave unconstrained output) where vLLM answers 400. structural_tag is
# vLLM's JSON text of a structural_tag response_format (an object of that form is taken too).
STRUCTURED_OUTPUTS = {"type": ["object", "null"], "properties": {
    "json": {"type": ["object", "string", "null"]}, "regex": _STRING, "grammar": _STRING, "json_object": _FLAG,
    "structural_tag": {"type": ["object", "string", "null"]},
    "choice": {"type": ["array", "null"], "items": {"type": "string"}}, "whitespace_pattern": _STRING,
    "disable_fallback": _FLAG, "disable_any_whitespace": _FLAG, "disable_additional_properties": _FLAG,
    "backend": _STRING}}
# structured_outputs keys that only pick a backend, its strictness or JSON's whitespace (always compact here, as
# guided_whitespace_pattern above); any other key changes the output.
_OUTPUT_OPTIONS = ("disable_fallback", "disable_any_whitespace", "disable_additional_properties", "backend",
                   "whitespace_pattern")
_unknown = OnceLog("ignoring unknown request fields %s")


def check_fields(body: dict, known: dict, chat: bool) -> None:
    """400 unsupported for a refused field that asks for something; logs each unknown field name once."""
    refused = {**REFUSED, **(CHAT_REFUSED if chat else {})}
    for name, (asks, why) in refused.items():
        if name in body and asks(body[name]):
            raise Unsupported(f"{name}: {why}", param=name)
    # best_of and n are typed by the schema of the routes that have them; /v1/responses has neither (a best_of there
    # is an unknown field, ignored as vLLM's ResponsesRequest ignores it), so its values were never type-checked.
    if "best_of" in known:
        check_best_of(body)
    check_cache_salt(body)
    if body.get("logprob_token_ids") == []:   # vLLM's check_logprobs; a non-empty list is refused above
        raise InvalidRequest("`logprob_token_ids` must not be an empty list.", param="logprob_token_ids")
    if FIELDS[0] in known:
        # Typed by the schema of the routes that honour them; elsewhere (the Responses API's) unknown fields.
        repetition_stop(body)
    _unknown.note(name for name in body
                  if name not in known and name not in NO_EFFECT and name not in HONOURED and name not in refused)


def check_cache_salt(body: dict) -> None:
    """vLLM's 400 for a cache_salt that is no non-empty string (its protocols' check_cache_salt_support, on chat,
    completions and Responses); a salt keeps the request's prefix-cache entries apart from other salts'."""
    salt = body.get("cache_salt")
    if salt is not None and (not isinstance(salt, str) or not salt):
        raise InvalidRequest("Parameter 'cache_salt' must be a non-empty string if provided.", param="cache_salt")


def check_best_of(body: dict) -> None:
    """best_of below n is OpenAI's and vLLM's 400 (it is the number of candidates n are picked from); above n it
    asks for best-of-n selection, which is not done here. A best_of equal to n changes nothing."""
    best_of, n = body.get("best_of"), body.get("n") or 1
    if best_of is None or best_of == n:
        return
    if best_of < n:
        raise InvalidRequest(f"best_of must be greater than or equal to n, got n={n} and best_of={best_of}",
                             param="best_of")
    raise Unsupported("best_of: values other than n are not supported (no best-of-n selection)", param="best_of")


def _choice_terminal(choices: Any, param: str) -> str:
    """The choices as one Lark terminal (one lexeme for llguidance's lexer). As a rule of string alternatives, each
    choice was an item of the parser's row, and past 2000 choices (llguidance's row limit) the first step failed:
    "Current row has 3003 items; max is 2000", a 400 with no field named."""
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) and c for c in choices):
        raise InvalidRequest(f"{param} must be a non-empty list of non-empty strings", param=param)
    return "GUIDED_CHOICE: " + " | ".join(json.dumps(c, ensure_ascii=False) for c in choices) + "\n"


def _regex_grammar(pattern: Any, param: str) -> str:
    """The pattern as a Lark regex lexeme, escaped by llguidance's own regex_to_lark (as vLLM's guidance backend's
    grammar_from("regex") writes it): a slash after an escaped backslash (`\\\\/`) and a literal newline or tab are
    pattern text, not the lexeme's end. \\d and \\w are ASCII ([0-9], [0-9a-zA-Z_]), as vLLM's default xgrammar
    backend and JSON Schema's patterns read them (Rust's regex reads them as Unicode: \\d{6}
    wrote digits of other scripts)."""
    if not isinstance(pattern, str) or not pattern:
        raise InvalidRequest(f"{param} must be a non-empty regular expression string", param=param)
    # regex_to_lark drops a dangling escape, which Rust's regex refuses ("incomplete escape sequence").
    if (len(pattern) - len(pattern.rstrip("\\"))) % 2:
        raise InvalidRequest(f"{param} ends with an incomplete escape sequence (a lone backslash)", param=param)
    return f"/{regex_to_lark(pattern, 'dw')}/"


_START_RULE = re.compile(r"^(\s*)([?!]?)start(\s*:)", re.MULTILINE)


def _as_lark(grammar: str, param: str) -> str:
    """A Lark grammar as it is; a GBNF one (root ::= ..., the syntax of vLLM's default xgrammar backend and of
    llama.cpp's grammars) converted by llguidance's gbnf_to_lark, as vLLM's guidance backend converts it."""
    if is_lark_syntax(grammar) or "::=" not in grammar:
        return grammar
    try:
        return any_to_lark(grammar)
    # gbnf_to_lark raises its GbnfToLarkError for syntax, and a bare Exception for a missing or undefined rule.
    except Exception as exc:
        raise InvalidRequest(f"{param} is not a valid GBNF grammar: {exc}", param=param) from exc


def lark_grammar(grammar: Any, param: str, thinking_open: bool, card) -> str:
    """A client's grammar (Lark or GBNF, converted to Lark) checked for a start rule; with thinking open, free text up
    to the think end tag comes first and the client's start rule follows it. InvalidRequest at `param` when empty or
    without start."""
    if not isinstance(grammar, str) or not grammar.strip():
        raise InvalidRequest(f"{param} must be a non-empty grammar string (Lark or GBNF)", param=param)
    grammar = _as_lark(grammar, param)
    if not _START_RULE.search(grammar):
        raise InvalidRequest(f"{param} needs a 'start' rule", param=param)
    if not thinking_open:
        return grammar
    # Thinking open: free reasoning up to </think>, then the client's grammar (its start rule renamed).
    return _START_RULE.sub(r"\1\2guided_start\3", grammar) + f"\nstart: {think_prefix(card)} guided_start\n"


# Fields whose empty value ("", {}, []) is no constraint: llama.cpp's grammar (params_from_json_cmpl applies only a
# non-empty one) and grammar_string, its name in text-generation-webui and TabbyAPI, TabbyAPI's json_schema (a filter
# only `if json_schema`), vLLM's guided_* as vLLM <= 0.6 and Aphrodite read them (outlines_decoding: `if
# request.guided_json: ... elif request.guided_grammar: ...`). SillyTavern's presets send the empty ones every time.
_EMPTY_IS_NONE = ("grammar", "grammar_string", "json_schema", "guided_json", "guided_grammar", "guided_regex",
                  "guided_choice")


def guided_given(body: dict, name: str) -> bool:
    """Whether the guided-decoding field `name` asks for a constraint: sent, not null, and not the empty value that
    the servers defining the field read as no constraint (_EMPTY_IS_NONE). grammar_string beside a grammar is the same
    grammar (SillyTavern's llama.cpp source sends both), read once as grammar."""
    value = body.get(name)
    if name == "grammar_string" and guided_given(body, "grammar"):
        return False
    return value is not None and not (name in _EMPTY_IS_NONE and value in ("", {}, []))


def _guided_spec(body: dict) -> Optional[tuple[str, Any, str]]:
    """(kind, value, param) of the one guided-decoding field present; 400 when several are. vLLM's deprecated
    guided_* fields are read only when structured_outputs, their successor, asks for nothing: vLLM read them that
    way while both existed and ignores them since, and clients written for both versions send both (guidance's
    VLLMModel sends every grammar as guided_grammar and structured_outputs.grammar)."""
    outputs = _structured_outputs_spec(body.get("structured_outputs"))
    found = [(kind, body[name], name) for kind, name in _GUIDED_KINDS
             if guided_given(body, name) and not (outputs and name in _VLLM_DEPRECATED)] + outputs
    if len(found) > 1:
        raise InvalidRequest(f"use one guided-decoding field, not both {found[0][2]} and {found[1][2]}",
                             param=found[1][2])
    return found[0] if found else None


def _structured_outputs_spec(outputs: Any) -> list:
    """[(kind, value, param)] of the constraints vLLM's structured_outputs object asks for."""
    found = []
    if outputs is not None:
        if not isinstance(outputs, dict):
            raise InvalidRequest("structured_outputs must be an object", param="structured_outputs")
        other = next((key for key in outputs if key not in _OUTPUT_KINDS + _OUTPUT_OPTIONS), None)
        if other is not None and outputs[other] is not None:
            raise Unsupported(f"structured_outputs.{other} is not supported (only {', '.join(_OUTPUT_KINDS)})",
                              param=f"structured_outputs.{other}")
        for kind in _OUTPUT_KINDS:
            if outputs.get(kind) not in (None, False):
                found.append((kind, outputs[kind], f"structured_outputs.{kind}"))
    return found


def _json_schema(value: Any, param: str) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise InvalidRequest(f"{param} is not valid JSON: {exc}", param=param) from exc
    if param == "json_schema" and isinstance(value, dict):
        # llama.cpp's own field: read as its json-schema-to-grammar reads it, as Ollama's format is.
        value = llama_cpp_schema(value)
    return check_schema(value, param)


def _grammar_constraint(grammar: Any, param: str, thinking_open: bool, card) -> Constraint:
    """A grammar field's Constraint. llama.cpp's `grammar` that cannot be used is its 400 "Failed to parse grammar"
    (its sampler init fails on it), the words its clients match to give up on the grammar or fall back to another
    structured-output channel, followed by the reason."""
    try:
        if thinking_open:
            # As check_answer: the newlines allowed after </think> hide a grammar that allows no answer.
            checked(lark_grammar(grammar, param, False, card), card, param)
        return checked(lark_grammar(grammar, param, thinking_open, card), card, param)
    except InvalidRequest as exc:
        if param != "grammar":
            raise
        raise InvalidRequest(f"Failed to parse grammar: {exc.message}", param=param, code=exc.code) from exc


def guided_constraint(body: dict, card, thinking_open: bool) -> Optional[tuple[Constraint, str]]:
    """vLLM guided_* / structured_outputs as (Constraint, param); None when the request has none."""
    spec = _guided_spec(body)
    if spec is None:
        return None
    kind, value, param = spec
    if kind == "structural_tag":
        return None
    if kind in ("json", "json_object"):
        schema = ANY_OBJECT if kind == "json_object" else _json_schema(value, param)
        if param == "json_schema":
            # llama.cpp's own field: its json-schema-to-grammar skips every keyword it has no rule for (its visit()),
            # so llama-server serves a schema with uniqueItems (pydantic's set), not, if / then, ... unenforced.
            schema = lenient(schema)
        return json_constraint(schema, thinking_open, card, param), param
    if kind == "grammar":
        return _grammar_constraint(value, param, thinking_open, card), param
    prefix = f"{think_prefix(card)} " if thinking_open else ""
    if kind == "choice":
        return checked(f"start: {prefix}GUIDED_CHOICE\n{_choice_terminal(value, param)}", card, param), param
    return checked(f"start: {prefix}{_regex_grammar(value, param)}\n", card, param), param
