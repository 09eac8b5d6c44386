"""Gateway process: structured output (response_format, Ollama `format`, forced tool calls) as worker grammars.

A request that must follow a grammar gets a Constraint (kind "lark", llguidance Lark text with embedded
%json{...} schemas) that the worker enforces token by token. Schemas are checked here first (Draft 2020-12,
then compiled by llguidance against the model's tokenizer), so what cannot be enforced is a 400 naming the
problem, never a 500; so is a grammar that compiles but allows no output ({"$ref": "#"}). Grammar copies of
schemas are bounded (gateway.schema_bounds, with SPARKINFER_GRAMMAR_MAX_STRING: default 1024 characters, 0 =
unbounded) so that a model that rambles inside a string still ends. JSON is compact (", " and ": " separators, no
other whitespace).
"""
from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Optional

from jsonschema import (Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator, Draft202012Validator,
                        FormatChecker)
from jsonschema.validators import validator_for

from gateway.errors import InvalidRequest
from gateway.grammar_check import grammar_error
from gateway.schema_bounds import any_object_schema, bounded_schema
from gateway.schema_errors import best_error, error_message
from gateway.schema_llama_cpp import llama_cpp_schema
from gateway.schema_numbers import BOUNDS, far_sides

DEFAULT_MAX_STRING_CHARS = 1024
# The schema of json_object / Ollama format "json" (its grammar is any_object_schema, bounded).
ANY_OBJECT = {"type": "object"}
# Integers llguidance writes exactly: const/enum values as doubles (2^53), bounds as 64-bit integers.
_EXACT_VALUES = ("const", "enum")
_MAX_EXACT_VALUE = 2**53
_MIN_BOUND, _MAX_BOUND = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Constraint:
    """What the worker enforces: pb.Constraint's kind and grammar text."""
    kind: str
    grammar: str


def max_string_chars() -> int:
    """Longest string a grammar lets the model write where the schema sets no bound (0 = unbounded)."""
    return int(os.environ.get("SPARKINFER_GRAMMAR_MAX_STRING") or DEFAULT_MAX_STRING_CHARS)


@functools.lru_cache(maxsize=256)
def _pattern_error(pattern: str) -> str:
    """Why llguidance (Rust's regex syntax, which enforces every `pattern`) cannot read a pattern, or ""."""
    import llguidance
    grammar = llguidance.LLMatcher.grammar_from_lark("start: %json" + json.dumps({"type": "string", "pattern": pattern}))
    error = llguidance.LLMatcher.validate_grammar(grammar)
    return "" if error.startswith("WARNING") else error


def _is_regex(pattern: Any) -> bool:
    """Whether llguidance or Python's re reads the pattern (re.error when neither does). One only re reads (a
    look-around) is then refused by the grammar compile, which names what llguidance cannot enforce."""
    if isinstance(pattern, str) and _pattern_error(pattern):
        try:
            re.compile(pattern)
        except RecursionError:
            # re's parser recurses once a group: groups some thousands deep ran out of stack (a 500).
            raise re.error("its groups nest too deeply to parse") from None
    return True


@functools.lru_cache(maxsize=8)
def _schema_formats(cls) -> FormatChecker:
    """The draft's format checker for a schema itself, its `regex` format (every `pattern`) read by llguidance too: JSON
    Schema patterns are ECMA-262 regexes, and Python's re alone (jsonschema's check) refused valid ones such as
    `^\\p{Lu}\\p{Ll}+$` or the named groups `(?<year>\\d{4})` of JavaScript clients."""
    checker = FormatChecker(formats=())
    checker.checkers = dict(cls.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=re.error)(_is_regex)
    return checker


def check_schema(schema: Any, param: str) -> dict:
    """400 unless schema is a JSON Schema object that its draft (2020-12 unless $schema names another) accepts and
    llguidance can enforce exactly."""
    if not isinstance(schema, dict):
        raise InvalidRequest(f"{param} must be a JSON Schema object", param=param)
    error = schema_error(schema)
    if error is not None:
        raise InvalidRequest(f"{param} is not a valid JSON Schema: {error}", param=param)
    _check_exact_integers(schema, param)
    return schema


def validator_class(schema: dict) -> type:
    """jsonschema's validator for the draft the schema's $schema names, else 2020-12's. A $schema that is no string
    ({"$schema": 5}) is left to 2020-12's meta-schema to refuse: jsonschema's lookup of it raised AttributeError or
    TypeError (a 500)."""
    if not isinstance(schema.get("$schema", ""), str):
        return Draft202012Validator
    return validator_for(schema, default=Draft202012Validator)


# The drafts a tool's parameters may be written in, newest first.
_DRAFTS = (Draft202012Validator, Draft201909Validator, Draft7Validator, Draft6Validator, Draft4Validator)


@functools.lru_cache(maxsize=8)
def _meta_validator(cls):
    """A validator of schemas written to draft `cls` (its meta-schema, with the regex format checked)."""
    return validator_for(cls.META_SCHEMA, default=cls)(cls.META_SCHEMA, format_checker=_schema_formats(cls))


def schema_error(schema: dict) -> Optional[str]:
    """Why schema is no JSON Schema its draft accepts (the reason and where: "'strng' is not one of ['array', ...]
    (at $.properties.a.type)"), or None."""
    # The draft its $schema names (draft-07's tuple `items` list, draft-04's boolean exclusiveMinimum, as
    # zod-to-json-schema and older pydantic write them; llguidance reads those drafts too), else 2020-12.
    # The best reason, not jsonschema's check_schema's first error (an anyOf's bare "is not valid under any of the
    # given schemas").
    error = best_error(_meta_validator(validator_class(schema)).iter_errors(schema))
    if error is None:
        return None
    return error_message(error) + (f" (at {error.json_path})" if error.absolute_path else "")


def any_draft_schema_error(schema: dict) -> Optional[str]:
    """schema_error, or None where some draft's meta-schema accepts the schema: tools carry draft-04 keywords under
    another draft's $schema, or none (a boolean exclusiveMinimum, as OpenAPI 3.0 writes it: Dokploy/mcp#74), and
    vLLM's and Ollama's servers read a tool's parameters without checking them at all. Remembered by the schema's
    JSON: an agent sends the same tools with every turn (a few hundred, with several MCP servers), and each check
    walks the meta-schema (about 3 ms a tool)."""
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return _any_draft_schema_error(schema)
    return _any_draft_schema_error_of(text)


@functools.lru_cache(maxsize=4096)
def _any_draft_schema_error_of(text: str) -> Optional[str]:
    return _any_draft_schema_error(json.loads(text))


# The same drafts, the cheap meta-schemas first: 2019-09's and 2020-12's $dynamicRef walk costs jsonschema ~5x
# draft-07's (a tool of 1000 string properties: 0.23 s against 0.04 s; best_error over 2020-12's errors 0.6 s).
_CHEAP_FIRST = (Draft7Validator, Draft6Validator, Draft4Validator, Draft201909Validator, Draft202012Validator)


def _any_draft_schema_error(schema: dict) -> Optional[str]:
    if any(_meta_validator(cls).is_valid(schema) for cls in _CHEAP_FIRST):
        return None
    return schema_error(schema)


def _integers(value: Any):
    """Every int inside a JSON value (bools excluded)."""
    if isinstance(value, int) and not isinstance(value, bool):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _integers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _integers(item)


def _inexact_integer(node: dict) -> Optional[tuple[str, int]]:
    for key in _EXACT_VALUES:
        big = next((n for n in _integers(node.get(key)) if abs(n) > _MAX_EXACT_VALUE), None) if key in node else None
        if big is not None:
            return key, big
    # A far bound the grammar copy drops (schema_numbers.far_sides: uint64's maximum 2^64 - 1) is never clamped.
    open_sides = far_sides(node)
    for key in (key for key in BOUNDS if key not in open_sides):
        bound = node.get(key)
        if isinstance(bound, int) and not isinstance(bound, bool) and not _MIN_BOUND <= bound <= _MAX_BOUND:
            return key, bound
    return None


def _check_exact_integers(node: Any, param: str) -> None:
    """400 for an integer llguidance would change: it writes const/enum numbers as doubles (9007199254740993 came
    out as ...992) and clamps integer bounds to 64 bits (a minimum of 2^64 - 5 gave 2^63 - 1), so the output would
    break the schema."""
    if isinstance(node, list):
        for item in node:
            _check_exact_integers(item, param)
    if not isinstance(node, dict):
        return
    found = _inexact_integer(node)
    if found is not None:
        key, number = found
        raise InvalidRequest(f"{param} cannot be enforced by constrained decoding: the integer {number} in '{key}' is "
                             f"beyond what it writes exactly (2^53 in const/enum, 64 bits in bounds)", param=param,
                             code="unsupported_schema")
    for key, child in node.items():
        if key not in _EXACT_VALUES:
            _check_exact_integers(child, param)


# The reasoning before </think> in every grammar built with thinking open (a thinking_token_budget names and bounds it).
THINK_BODY = "/(?s:.*)/"
# What may stand between </think> and the constrained answer: the newlines the template writes there
# (`</think>\n\n`), which the reasoning split drops. Any other blank would start the answer: a guided_choice came back
# as "\t  yes", where vLLM (structured output advancing only after the reasoning end) gives exactly "yes".
AFTER_THINK = "/\\n{0,2}/"


def think_prefix(card) -> str:
    """Lark items of a grammar built with thinking open: free reasoning, </think>, the newlines after it."""
    end = "</think>" if card is not None and card.is_added_token("</think>") else '"</think>"'
    return f"{THINK_BODY} {end} {AFTER_THINK}"


def json_grammar(schema: dict, thinking_open: bool, card) -> str:
    """Lark text: JSON matching schema (ANY_OBJECT: any object); with thinking open, free reasoning up to </think>."""
    limit = max_string_chars()
    grammar_schema = any_object_schema(limit) if schema is ANY_OBJECT else schema
    body = "%json" + json.dumps(bounded_schema(grammar_schema, limit), ensure_ascii=False)
    if not thinking_open:
        return f"start: {body}\n"
    return f"start: {think_prefix(card)} {body}\n"


def response_format_schema(response_format: Optional[dict]) -> Optional[dict]:
    """The schema an OpenAI response_format asks for; None for text (or no response_format). llama.cpp's forms with
    the schema beside the type ({"type": "json_object", "schema": ...}, {"type": "json_schema", "schema": ...}, its
    README's two schema-constrained examples) ask for that schema, and so does text-generation-inference's
    {"type": "json_object", "value": ...} (its GrammarType, content "value"), which huggingface_hub's InferenceClient
    sends for every json_schema one (hf_inference.py, HFInferenceConversational._prepare_payload_as_dict)."""
    kind = (response_format or {}).get("type", "text")
    if kind in ("text", "structural_tag"):
        # A structural tag is no schema (gateway.structural_tag reads it).
        return None
    if response_format.get("schema") is not None and (kind == "json_object" or "json_schema" not in response_format):
        # llama.cpp's form: the schema read as its converter reads it.
        return check_schema(llama_cpp_schema(response_format["schema"]), "response_format.schema")
    if kind == "json_object" and response_format.get("value") is not None:
        return check_schema(response_format["value"], "response_format.value")
    if kind == "json_object":
        return ANY_OBJECT
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or "schema" not in spec:
        raise InvalidRequest("response_format json_schema needs json_schema.schema",
                             param="response_format.json_schema")
    return check_schema(spec["schema"], "response_format.json_schema.schema")


def checked(grammar: str, card, param: str) -> Constraint:
    """The Constraint for Lark text, after llguidance compiled it and found a first token; 400 naming the problem
    otherwise."""
    error = grammar_error(grammar, card)
    if error:
        raise InvalidRequest(f"{param} cannot be enforced by constrained decoding: {error}", param=param,
                             code="unsupported_schema")
    return Constraint("lark", grammar)



def check_answer(schema: dict, card, param: str) -> None:
    """400 unless the JSON of schema alone can be written. Reasoning before it or a tool call beside it would hide a
    schema that allows no JSON: after </think> the grammar allows newlines, so its first mask there is not empty."""
    checked(json_grammar(schema, False, card), card, param)


def json_constraint(schema: dict, thinking_open: bool, card, param: str) -> Constraint:
    """checked() json_grammar, its answer checked alone too where reasoning comes first."""
    if thinking_open:
        check_answer(schema, card, param)
    return checked(json_grammar(schema, thinking_open, card), card, param)
