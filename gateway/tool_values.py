"""Gateway process: the typed value of one Qwen3.5 XML tool-call parameter, read from its raw text and the tool's
parameter schema.

The XML carries no types: `<parameter=limit>\\n4\\n</parameter>` is the number 4 or the string "4" as the schema says.
The first reading (raw text for a string, else strict JSON, else the Python literal Qwen models also write: True,
None, {'k': 'v'}, as vLLM's qwen3_coder parser reads them) is kept when the schema accepts it. When it does not, as
for 4 where the schema is {"type": ["string", "null"]}, pydantic's Optional[str] (anyOf string / null) or
{"enum": ["4", "5"]}, the first other reading it accepts is taken (jsonschema decides, with the parameters'
`$defs` for refs); a first reading that nothing beats stays. An empty value the schema refuses ("" for an integer)
leaves an optional parameter out (sgl-project/sglang#36835: models write an empty tag for "not given"). A parameter
the tool does not declare, or declares with no type ({"description": ...}), stays the text the model wrote.
"""
from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from jsonschema.exceptions import SchemaError, UnknownType
from referencing.exceptions import Unresolvable

from gateway.schema_bounds import formatted_string
from gateway.structured import validator_class
from gateway.strict_json import load_json
from gateway.tool_parameters import DEFS_KEYS, local_target, tool_parameters

# A number in decimal, as int() and float() (vLLM) and ParseInt / ParseFloat (Ollama) read one, not 0x10; digits
# grouped by underscores (1_000) as int() reads them (int() refuses a misplaced one).
_DECIMAL = re.compile(r"[+-]?(?:[\d_]+\.?[\d_]*|\.[\d_]+)(?:[eE][+-]?\d+)?")
_DIGITS = re.compile(r"[+-]?[\d_]+")
# Keywords that describe a parameter without saying anything of its value: a schema of these alone ({"description":
# "the id"}, {}) gives the value no type.
_ANNOTATION_KEYS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated", "readOnly",
                              "writeOnly"})


def untyped(schema: Any) -> bool:
    """Whether a declared parameter's schema gives its value no type: then the value is its text as written, as vLLM's
    qwen3_coder reads a parameter with no "type" (_convert_param_value: "string") and Ollama's parser one with no
    types (parseTypedToolValue: the raw string)."""
    return isinstance(schema, dict) and set(schema) <= _ANNOTATION_KEYS


@dataclass
class ToolParams:
    """A tool's parameter schemas: by name, which are required, and the `$defs` their refs point into (with the
    draft its `$schema` names)."""
    props: dict = field(default_factory=dict)
    required: frozenset = frozenset()
    defs: dict = field(default_factory=dict)
    others: Optional[dict] = None   # additionalProperties' schema: the type of a parameter `props` does not name

    @classmethod
    def of(cls, tools: list[dict], name: str) -> "ToolParams":
        """The parameter schemas of the tool named `name` in `tools`; empty when none is."""
        for tool in tools:
            function = tool.get("function") or {}
            if function.get("name") == name:
                params = tool_parameters(function)
                props = params.get("properties") or {}
                required = params.get("required") or []
                shared = {key: params[key] for key in DEFS_KEYS if isinstance(params.get(key), dict)}
                if isinstance(params.get("$schema"), str):
                    shared["$schema"] = params["$schema"]
                others = params.get("additionalProperties")
                return cls({key: value for key, value in props.items() if isinstance(value, dict)},
                           frozenset(r for r in required if isinstance(r, str)), shared,
                           others if isinstance(others, dict) and others else None)
        return cls()

    def arguments(self, params: list) -> dict:
        """{name: typed value} of the call's (name, raw text) pairs."""
        out = {}
        for key, raw in params:
            schema = self.props.get(key, self.others)
            if is_null_word(raw):
                # null (in any case) is null whatever the parameter's type, declared or not, as vLLM's qwen3_coder
                # (_convert_param_value: "Handle null value for any type") and Ollama's parser (parseTypedToolValue:
                # "this takes precedence over any type") read it: a string parameter's null came back as "null".
                out[key] = None
                continue
            if schema is None or untyped(schema):
                # A parameter the tool does not declare (nor type by additionalProperties), or declares with no type,
                # has no type to read it by: its text, as vLLM's qwen3_coder (_convert_param_value: "directly
                # returning the string value") and Ollama's parser return it ("1e3" stays "1e3", not 1000.0).
                out[key] = raw
                continue
            validator = _validator(schema, self.defs)
            value = whole_number(fitted(raw, typed_value(raw, schema), validator), schema, self.defs)
            if raw.strip() == "" and key not in self.required and not _accepts(validator, value, True):
                continue
            out[key] = single_type_value(raw, value, schema, self.defs)
        return out


def _types(schema: Optional[dict]) -> set:
    declared = (schema or {}).get("type")
    return {declared} if isinstance(declared, str) else set(declared) if isinstance(declared, list) else set()


def typed_value(raw: str, schema: Optional[dict]) -> Any:
    """The first reading of a parameter's text: raw text for strings; otherwise strict JSON, or the Python literal
    the schema's type asks for; anything else stays the text as written."""
    types = _types(schema)
    if raw.strip().lower() in ("none", "null") and _admits_null(schema):
        # Qwen3.5's template writes a null argument as Python's None (`| string`), so a nullable parameter's
        # None / null is null even where a string is allowed too (pydantic's Optional[str]), as vLLM's
        # qwen3_coder parser reads it (_convert_param_value: allows_null).
        return None
    if types and types <= {"string"}:
        return _unquoted(raw) if formatted_string(schema) else raw
    try:
        return load_json(raw)
    except ValueError:   # not JSON (or an integer of more digits than int() takes)
        pass
    word = raw.strip().lower()
    if "boolean" in types and word in ("true", "false"):
        return word == "true"
    if word in ("none", "null") and types - {"string"}:
        return None
    if types & {"object", "array"}:
        return _python_container(raw)
    return raw


def _admits_null(schema: Optional[dict]) -> bool:
    """Whether the schema names null as a type: its own, or one of its anyOf / oneOf branches'."""
    if "null" in _types(schema):
        return True
    branches = [b for key in ("anyOf", "oneOf") for b in (schema or {}).get(key) or [] if isinstance(b, dict)]
    return any(_admits_null(branch) for branch in branches)


def _unquoted(raw: str) -> str:
    """A formatted string's text: a forced call writes it as a JSON string ("2026-01-01"), a free one as text."""
    if len(raw) < 2 or not (raw.startswith('"') and raw.endswith('"')):
        return raw
    try:
        value = load_json(raw)
    except ValueError:
        return raw
    return value if isinstance(value, str) else raw


def _python_container(raw: str) -> Any:
    value = _python_literal(raw)
    return value if isinstance(value, (dict, list)) else raw


def _python_literal(raw: str) -> Any:
    try:
        value = ast.literal_eval(raw.strip())
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return raw
    return value


def _readings(raw: str, inner: bool = True) -> Iterator[Any]:
    """Every value the text may stand for: itself, its JSON, its Python literal, a true / false / null word; and for
    a JSON string, the readings of its text ("{\\"k\\": 1}" for an object is {"k": 1}, as vLLM's qwen3_coder decodes
    a container written so once more: a model trained on json.dumps(str(value)) writes them)."""
    yield raw
    try:
        decoded = load_json(raw)
    except ValueError:
        decoded = None
    else:
        yield decoded
    yield _python_literal(raw)
    if inner and isinstance(decoded, str):
        yield from _readings(decoded, False)
    word = raw.strip().lower()
    if word in ("true", "false"):
        yield word == "true"
    if word in ("none", "null"):
        yield None


def _validator(schema: Optional[dict], defs: dict):
    """A validator for a parameter's schema (its tool's $defs beside it); None when there is nothing to check."""
    if not schema:
        return None
    schema = {**{key: value for key, value in defs.items() if key not in schema}, **schema}
    cls = validator_class(schema)
    try:
        cls.check_schema(schema)
    except (SchemaError, RecursionError):
        return None
    return cls(schema)


def _accepts(validator, value: Any, unknown: bool = True) -> bool:
    if validator is None:
        return unknown
    try:
        return validator.is_valid(value)
    except (Unresolvable, UnknownType, RecursionError):
        return unknown


def whole_number(value: Any, schema: dict, defs: Optional[dict] = None) -> Any:
    """An integral float (140.0, 6e4) of an integer or number parameter as the integer it is: Codex's and other typed
    clients' decoders refuse 140.0 for an integer ("invalid type: floating point `140.0`, expected u64"); vLLM's
    qwen3_coder and Ollama's parser write a whole number so for a number parameter too (mlx-lm#1635 for integers).
    The type may come from a union or a $ref into the tool's `defs` (pydantic's Optional[int]; JSON Schema counts 140
    and 140.0 as one number, so the schema accepts both). Past 2**53 a float is no exact integer, and stays as read."""
    numeric = bool(_named_types(schema, defs or {}, set()) & {"integer", "number"})
    if numeric and isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    return value


def _named_types(schema: Any, defs: dict, seen: set) -> set:
    """The types a schema names: its own, its anyOf / oneOf / allOf branches' and those of the local $refs it follows
    into `defs` (each ref once, so a recursive or wide schema is walked in linear time)."""
    if not isinstance(schema, dict):
        return set()
    types = _types(schema)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        seen.add(ref)
        types |= _named_types(local_target(defs, ref), defs, seen)
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        for branch in branches if isinstance(branches, list) else ():
            types |= _named_types(branch, defs, seen)
    return types


def single_type_value(raw: str, value: Any, schema: dict, defs: Optional[dict] = None) -> Any:
    """A parameter of one type read as vLLM's qwen3_coder (_convert_param_value) and Ollama's parser
    (parseTypedToolValue) both read it: for a boolean every word but true / false (yes, no, 1) is false; an integer
    or a number is read from its decimal text (007 is 7), and any other text (1.5 for an integer, 0x10, [1], true)
    is the text the model wrote (a whole 2.0 is the integer: whole_number). A nullable number (["integer", "null"],
    pydantic's Optional[int]: anyOf integer / null) is read so too, as vLLM reads an anyOf by its first non-null type
    and Ollama a type list integer first (007 came back as "007"). null stays null; other types keep the reading the
    schema fitted."""
    types = _types(schema)
    if value is None:
        return value
    if types == {"boolean"}:
        return value if isinstance(value, bool) else False
    numeric = _named_types(schema, defs or {}, set()) - {"null"}
    if numeric and numeric <= {"integer", "number"}:
        return _decimal(raw, numeric == {"integer"})
    return value


def _decimal(raw: str, integer: bool) -> Any:
    """The number raw spells in decimal (int() / float(), as both parsers read it: a sign, leading zeros, a
    fraction, an exponent), an integer's only when it is whole; else raw."""
    text = raw.strip()
    if not _DECIMAL.fullmatch(text):
        return raw
    try:
        number = int(text) if _DIGITS.fullmatch(text) else whole_number(float(text), {"type": "number"})
    except ValueError:  # more digits than int() reads
        return raw
    if not math.isfinite(number) or (integer and not isinstance(number, int)):
        return raw
    return number


def is_null_word(raw: str) -> bool:
    """Whether a parameter's text is the word null in any case, which every parameter reads as null."""
    return raw.lower() == "null"


def fitted(raw: str, first: Any, validator) -> Any:
    """`first` when the schema accepts it (or cannot tell), else the first other reading of raw it accepts."""
    if _accepts(validator, first):
        return first
    return next((value for value in _readings(raw) if _accepts(validator, value, False)), first)
