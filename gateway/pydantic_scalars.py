"""Gateway process: request scalars read as pydantic's lax mode (vLLM's request models) reads them, against a schema.

JSON Schema is strict where pydantic is not: vLLM answers `"temperature": "0.7"`, `"max_tokens": "512"` and
`"stream": "true"` (and `"stream": 1`, and `"logprobs": true` where an integer is wanted) with the values they spell
(Cline 3.34 sent its temperature as a string, cline#7183). lax_scalars makes the body what pydantic would have made of
it, so the schema checks the value and the rest of the gateway sees a number (schema_validate.integral reads 5.0 where
an integer is wanted as 5, the same way).
"""
from __future__ import annotations

import math
import re
from typing import Any

# pydantic-core's str -> int: an optional sign, ASCII digits, and only zeros after a decimal point ("5", "+5", "5.00");
# at most 4300 digits (its int_parsing_size error past them, where Python's int() raises ValueError).
_INT_TEXT = re.compile(r"[+-]?[0-9]+(\.0*)?")
_MAX_INT_DIGITS = 4300
# pydantic-core's str -> float: ASCII digits with an optional fraction and exponent (Python's float() also takes
# other scripts' digits and underscores, which pydantic refuses).
_FLOAT_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
# pydantic-core's str -> bool words (case-insensitive).
_TRUE, _FALSE = {"true", "1", "yes", "on", "t", "y"}, {"false", "0", "no", "off", "f", "n"}


def _types(schema: dict) -> set:
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind} if kind else set()
    for alternative in schema.get("anyOf", ()):
        if isinstance(alternative, dict):
            kinds |= _types(alternative)
    return kinds


def _from_text(text: str, kinds: set) -> Any:
    """text as the number or boolean the schema wants, or text itself when it spells none (the schema refuses it)."""
    word = text.strip()
    digits = word.split(".")[0]
    if "integer" in kinds and _INT_TEXT.fullmatch(word) and len(digits.lstrip("+-")) <= _MAX_INT_DIGITS:
        return int(digits)
    if "number" in kinds and _FLOAT_TEXT.fullmatch(word) and math.isfinite(float(word)):
        return float(word)
    if "boolean" in kinds and word.lower() in _TRUE | _FALSE:
        return word.lower() in _TRUE
    return text


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def lax_scalars(value: Any, schema: Any) -> Any:
    """value with every string where schema wants a number, integer or boolean (and no string), and every boolean
    where it wants a number and no boolean, read as pydantic's lax mode reads it; objects and lists are changed in
    place, each property and item against its own schema."""
    if not isinstance(schema, dict):
        return value
    kinds = _types(schema)
    if isinstance(value, str) and "string" not in kinds and kinds & {"number", "integer", "boolean"}:
        return _from_text(value, kinds)
    if _is_number(value) and "boolean" in kinds and not kinds & {"number", "integer"} and value in (0, 1):
        # pydantic-core's int / float -> bool: 0 and 1 (0.0 and 1.0) only ("stream": 1 streams; 2 stays the 400).
        return value == 1
    if isinstance(value, bool) and kinds & {"number", "integer"} and "boolean" not in kinds:
        # pydantic-core's bool -> int / float: true is 1, false 0 ("logprobs": true on /v1/completions, as
        # llama-stack sends it, asks for 1 alternative).
        return int(value) if "integer" in kinds else float(value)
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                value[key] = lax_scalars(value[key], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        value[:] = [lax_scalars(item, schema["items"]) for item in value]
    return value
