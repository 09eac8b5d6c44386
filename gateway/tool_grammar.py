"""Gateway process: llguidance Lark grammars for forced tool calls in the Qwen3.x XML format (tool_choice required / named).

One call renders as the chat template writes it:
  <tool_call>\\n<function=NAME>\\n<parameter=P>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>
calls are joined by "\\n" (at most MAX_PARALLEL_CALLS; exactly one when parallel_tool_calls is false or one
function is named, as OpenAI's named tool_choice and vLLM's grammar for it give one call).
Parameters follow the schema's `properties` order: required ones always, optional ones may be left out,
unknown ones never appear. A parameter whose schema type is exactly "string" is raw text that never holds
</parameter> (its enum / const values as literals; at most maxLength, else SPARKINFER_GRAMMAR_MAX_STRING
characters); every other value is JSON from `%json{...}` of its property schema (strings inside bounded the same
way, see schema_bounds). A raw string's `pattern` is enforced as JSON Schema reads it (a search), with its length
bounds, otherwise approximated by the free text. Plain numbers and integers are at most 18 digits
(a number's exponent at most 2, so it is a finite double; JSON numbers: see gateway.schema_numbers).
"""
from __future__ import annotations

import json
import re
from typing import Optional

from gateway.errors import InvalidRequest
from gateway.schema_bounds import bounded_schema, formatted_string, lenient as lenient_schema
from gateway.structured import checked, json_grammar, max_string_chars, think_prefix
from gateway.thinking_budget import any_token_but
from gateway.pattern_regex import whole_text_regex, whole_text_regex_is_closed
from gateway.tool_markup import MARKUP_NAME_RE
from gateway.tool_parameters import tool_parameters
from gateway.tool_values import untyped

_INTEGER = r"/-?(0|[1-9][0-9]{0,17})/"
# An exponent of at most two digits keeps every number a finite double (8e691 was read back as a string).
_NUMBER = r"/-?(0|[1-9][0-9]{0,17})(\.[0-9]{1,17})?([eE][+-]?[0-9]{1,2})?/"
_PLAIN = {"integer": _INTEGER, "number": _NUMBER, "boolean": '"true" | "false"', "null": '"null"'}
MAX_PARALLEL_CALLS = 8   # calls in one forced turn at most (a rambling model still ends)
_CLOSE = "\\n</parameter>\\n"
_CLOSE_RX = "\\n<\\/parameter>\\n"
_ANNOTATIONS = {"type", "description", "title", "default", "examples", "$comment", "format"}
_DEFS_KEYS = ("$defs", "definitions")


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _is_raw_string(schema: dict) -> bool:
    """A value written as raw text: a string, or a parameter with no type (read back as its text, tool_values)."""
    kind = schema.get("type")
    return kind == "string" or kind == ["string"] or untyped(schema)


def _unsatisfiable(why: str) -> InvalidRequest:
    return InvalidRequest(f"tools: a string parameter {why}, so no call can satisfy it", param="tools",
                          code="unsupported_schema")


def _unwritable(function: str, name: str) -> InvalidRequest:
    """A parameter name the call markup cannot carry: the grammar would write a call that reads back as another one
    (<parameter=a>b> is 'a' with the value 'b>...') or none at all (an empty name), a wrong or missing call."""
    return InvalidRequest(f"tools: parameter {json.dumps(name, ensure_ascii=False)} of '{function}' cannot be written "
                          f"in the tool-call markup (<parameter=NAME>): a name may not be empty, hold '>', a line "
                          f"break or a control character, or start or end with a space", param="tools")


def _length_bound(schema: dict, limit: int) -> str:
    """The `{low,high}` repetition for a raw string's length (maxLength, else limit; 0 = unbounded)."""
    low = int(schema.get("minLength", 0))
    # The string cap (limit) never goes below the schema's own minLength; only a maxLength it sets can.
    high = schema.get("maxLength", max(limit, low) if limit else None)
    if high is not None and int(high) < low:
        raise _unsatisfiable(f"has minLength {low} > maxLength {high}")
    return f"{{{low},{int(high)}}}" if high is not None else f"{{{low},}}"


def _string_choices(schema: dict) -> str:
    """A string's enum / const values as literals."""
    choices = schema.get("enum") if "enum" in schema else [schema["const"]]
    strings = [c for c in choices if isinstance(c, str)]
    if not strings:
        raise _unsatisfiable("allows no string value (enum/const)")
    return " | ".join(_literal(c) for c in strings)


def _text_without(word: str) -> str:
    """A regex of the texts that never hold `word` (whose first character occurs nowhere else in it): any character
    but that first one, or a run of it followed by a part of `word` that then breaks off, or ends the text."""
    first, rest = re.escape(word[0]), word[1:]

    def breaks(i: int) -> str:
        leaf = f"[^{re.escape(rest[i])}{first}]"
        return leaf if i == len(rest) - 1 else f"(?:{leaf}|{re.escape(rest[i])}{breaks(i + 1)})"
    part = ""
    for char in reversed(rest[:-1]):
        part = f"(?:{re.escape(char)}{part})?"
    run = f"{first}(?:{part}{first})*"
    return f"(?:[^{first}]|{run}{breaks(0)})*(?:{run}{part})?".replace("/", "\\/")


# A raw string value: any text but its own closing tag, so code, HTML or a comparison keep their "<" (a value was
# text without "<" at all: std::vector<int> or a < b could not be written in a forced call).
_FREE_TEXT = _text_without("</parameter>")


def _pattern_lexeme(pattern) -> Optional[str]:
    """The lexeme of a pattern, read as JSON Schema reads it (a search: "^x" starts with x, "x" holds one), with the
    closing tag; a side it leaves open is free text that never holds </parameter>. None for a pattern no lexeme here
    can write (an anchor inside it, a regex llguidance does not read): the free text approximates it."""
    whole = whole_text_regex(pattern) if isinstance(pattern, str) else None
    if whole is None:
        return None
    from llguidance import regex_to_lark
    try:
        lexeme = f"/(?:{regex_to_lark(whole, 'dw')}){_CLOSE_RX}/"
    except ValueError:
        return None
    return lexeme if whole_text_regex_is_closed(whole) else f"{lexeme} & /{_FREE_TEXT}{_CLOSE_RX}/"


def string_terminal(schema: dict, limit: int) -> Optional[str]:
    """The Lark terminal of a raw string value with its closing tag: its pattern, else free text that never
    holds </parameter> (a format llguidance enforces is a JSON string instead: None, as for enum / const literals and
    every other type). The length bounds (minLength, maxLength, else `limit`) apply too, intersected (`&`, which
    llguidance allows on terminals only): a pattern alone let `^[a-z]+$` with maxLength 3 run on for hundreds of
    tokens. The word null is left out (`~`), so a forced call's string reads back as a string."""
    if not _is_raw_string(schema) or "enum" in schema or "const" in schema:
        return None
    lexeme = _pattern_lexeme(schema.get("pattern"))
    if lexeme is None and formatted_string(schema):
        return None
    # One lexeme with the closing tag: llguidance lexes greedily, so a separate value lexeme would swallow the
    # newline before </parameter>.
    lexeme = lexeme or f"/{_FREE_TEXT}{_CLOSE_RX}/"
    bound = _length_bound(schema, limit)
    # Never the word null, which reads back as null whatever the parameter's type (tool_values.is_null_word).
    lexeme = f"{lexeme} & ~/(?i:null){_CLOSE_RX}/"
    return lexeme if bound == "{0,}" else f"{lexeme} & /(?s:.{bound}){_CLOSE_RX}/"


def check_string_patterns(tools: list, card) -> None:
    """400 for a pattern that no string within its parameter's length bounds matches (^a{10}$ with
    maxLength 5): the call grammar compiles, and the worker failed the request once the model reached that value."""
    limit = max_string_chars()
    for tool in tools:
        function = tool["function"]
        for name, schema in (tool_parameters(function).get("properties") or {}).items():
            patterned = isinstance(schema, dict) and _pattern_lexeme(schema.get("pattern")) is not None
            terminal = string_terminal(schema, limit) if patterned else None
            if terminal is None:
                continue
            try:
                checked(f"start: VALUE\nVALUE: {terminal}\n", card, "tools")
            except InvalidRequest:
                raise _unsatisfiable(f"('{name}' of '{function['name']}') has a pattern that no string within its "
                                     f"length bounds matches") from None


def _shared_defs(params: dict) -> dict:
    """The `$defs` / `definitions` of a tool's parameters: its properties' `#/$defs/...` refs point there."""
    shared = {key: params[key] for key in _DEFS_KEYS if isinstance(params.get(key), dict)}
    if isinstance(params.get("$schema"), str):
        shared["$schema"] = params["$schema"]     # the draft the parameters are written in (draft-07 tuples, ...)
    return shared


def value_rule(schema: dict, limit: int, defs: Optional[dict] = None, lenient: bool = False) -> str:
    """The Lark right-hand side for one parameter value and its closing tag. `defs` (the parameters'
    `$defs` / `definitions`) go along into a JSON value's schema, so its local `$ref`s still resolve
    (pydantic and zod put nested models there: vllm-project/vllm#20470, sgl-project/sglang#31692). lenient: a keyword
    the grammar has no rule for is left unenforced (schema_bounds.lenient)."""
    if not isinstance(schema, dict):
        schema = {}
    if formatted_string(schema):
        # A format (date-time, email, uuid, ...) has no raw-text rule: its JSON string, which typed_value unquotes.
        value = "%json" + json.dumps(bounded_schema(schema, limit), ensure_ascii=False)
    elif _is_raw_string(schema):
        value = _string_choices(schema)         # other raw strings are terminals (string_terminal)
    elif isinstance(schema.get("type"), str) and schema["type"] in _PLAIN and set(schema) <= _ANNOTATIONS:
        value = _PLAIN[schema["type"]]
    else:
        shared = {key: value for key, value in (defs or {}).items() if key not in schema}
        whole = lenient_schema({**shared, **schema}) if lenient else {**shared, **schema}
        value = "%json" + json.dumps(bounded_schema(whole, limit), ensure_ascii=False)
    return f'({value}) "{_CLOSE}"'


def _function_rules(index: int, function: dict, limit: int, markup: dict, lenient: bool = False) -> list:
    params = tool_parameters(function)
    props = params.get("properties") or {}
    required = set(params.get("required") or [])
    defs = _shared_defs(params)
    rules, parts = [], []
    for k, (name, schema) in enumerate(props.items()):
        if not MARKUP_NAME_RE.match(name):
            raise _unwritable(function["name"], name)
        if schema is False:
            # JSON Schema's false: no value is valid, so the parameter is never written (it was any JSON).
            if name in required:
                raise InvalidRequest(f"tools: parameter '{name}' of '{function['name']}' is required but its schema "
                                     f"is false, which no value satisfies, so no call can satisfy it",
                                     param="tools", code="unsupported_schema")
            continue
        rule, terminal = f"f{index}_p{k}", string_terminal(schema if isinstance(schema, dict) else {}, limit)
        if terminal is not None:
            rules.append(f"F{index}_P{k}: {terminal}")
        value = f"F{index}_P{k}" if terminal is not None else value_rule(schema, limit, defs, lenient)
        rules.append(f'{rule}: "<parameter={_literal(name)[1:-1]}>\\n" {value}')
        parts.append(rule if name in required else f"{rule}?")
    head = _literal(f"\n<function={function['name']}>\n")
    body = " ".join(parts)
    rules.insert(0, f'f{index}: {markup["open"]} {head} {body} "</function>\\n" {markup["close"]}')
    return rules


def _markup(card) -> dict:
    """Special-token references when the tokenizer has <tool_call> as one added token, else plain text."""
    def ref(text: str) -> str:
        return text if card is not None and card.is_added_token(text) else _literal(text)
    return {"open": ref("<tool_call>"), "close": ref("</tool_call>")}


def tool_call_grammar(tools: list, name: Optional[str], parallel: bool, card=None,
                      limit: Optional[int] = None, lenient: bool = False) -> str:
    """Lark text: one call (or, with parallel, one or more) to the offered tools, or exactly one call to `name`."""
    limit = max_string_chars() if limit is None else limit
    markup = _markup(card)
    # A name offered twice is forced by its first definition, the one a call is read back by (tool_values).
    firsts = {t["function"]["name"]: t["function"] for t in reversed(tools)}
    functions = [t["function"] for t in tools if firsts[t["function"]["name"]] is t["function"]
                 and (name is None or t["function"]["name"] == name)]
    rules = []
    for index, function in enumerate(functions):
        rules.extend(_function_rules(index, function, limit, markup, lenient))
    call = " | ".join(f"f{i}" for i in range(len(functions)))
    many = parallel and name is None
    start = f'start: call ("\\n" call){{0,{MAX_PARALLEL_CALLS - 1}}}' if many else "start: call"
    return "\n".join([start, f"call: {call}"] + rules) + "\n"


def calls_or_json_grammar(tools: list, parallel: bool, schema: dict, thinking_open: bool, card=None,
                          lenient: bool = False) -> str:
    """Lark text for response_format (or Ollama format) with tools: tool calls, or JSON for schema (as OpenAI).

    With thinking open, the reasoning comes first either way (json_grammar's prefix). lenient: the calls' values leave
    a keyword the grammar has no rule for unenforced, as Ollama enforces no tool schema."""
    calls = tool_call_grammar(tools, None, parallel, card, lenient=lenient).replace("start:", "calls:", 1)
    answer = json_grammar(schema, thinking_open, card)
    at = answer.index("%json")
    return f"{answer[:at]}(calls | {answer[at:].rstrip()})\n{calls}"


def strict_calls_grammar(tools: list, parallel: bool, thinking_open: bool, card) -> Optional[str]:
    """Lark text for tool_choice auto with a strict tool (OpenAI's strict function calling, vLLM's
    VLLM_ENFORCE_STRICT_TOOL_CALLING): any answer text, and the calls after it follow the tools' schemas; a
    <tool_call> token opens a call only. None when <tool_call> is no single added token to keep out of the text.
    With thinking open, the reasoning comes first."""
    if card is None or not card.is_added_token("<tool_call>"):
        return None
    calls = tool_call_grammar(tools, None, parallel, card).replace("start:", "calls:", 1)
    prefix = f"{think_prefix(card)} " if thinking_open else ""
    return f"start: {prefix}{any_token_but(card, [card.token_id('<tool_call>')])}* calls?\n{calls}"
