"""Gateway process: reads one Qwen3.5 XML tool call (<function=NAME><parameter=P>VALUE</parameter>...) by its
structure, and types each value from the tool's schema.

The XML has no escaping, so a value may hold the markup itself (a file that mentions </tool_call>, a command that
prints <parameter=x>...</parameter>). A `</parameter>` ends a value only where what follows it is the next
parameter or the end of the function, and the whole call then reads to its `</tool_call>`; the first such reading
wins (ninfer#138, Rapid-MLX#1515: a first-match regex cut those values and lost the call).
"""
from __future__ import annotations

import ast
import json
from typing import Any, Optional

import orjson

FUNCTION_OPEN = "<function="
FUNCTION_CLOSE = "</function>"
PARAM_OPEN = "<parameter="
PARAM_CLOSE = "</parameter>"
CALL_CLOSE = "</tool_call>"
# Readings tried per call before giving up (each a </parameter> that the next parameter or </function> follows),
# and parameters per call: they bound what a hostile output costs (and the reader's recursion).
_MAX_TRIES = 1024
_MAX_PARAMS = 256


def load_json(text: str) -> Any:
    """Strict JSON as orjson reads it (no NaN, Infinity, 1e999 or lone surrogates: ValueError), but with every
    integer exact: orjson checks the text, the json module builds the value. Nesting too deep for the json module
    (it recurses per level; orjson allows 1024) is a ValueError too, so a model that nests a value that deep leaves
    it text instead of failing the request."""
    orjson.loads(text)
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc


def skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


class _Reader:
    """One call's text from just after `<function=NAME>`; `whole`: its </tool_call> must end the text or be
    followed by the next <tool_call>."""

    def __init__(self, text: str, whole: bool):
        self.text, self.whole = text, whole
        self.tries = _MAX_TRIES

    def name_at(self, pos: int) -> Optional[tuple[str, int]]:
        """(name, index after '>') of a <parameter=NAME> at pos."""
        if not self.text.startswith(PARAM_OPEN, pos):
            return None
        end = self.text.find(">", pos + len(PARAM_OPEN))
        name = self.text[pos + len(PARAM_OPEN):end].strip() if end >= 0 else ""
        if not name or "\n" in name:
            return None
        return name, end + 1

    def params(self, pos: int, depth: int = 0) -> Optional[tuple[list, int]]:
        """([(name, raw value)], index after </tool_call>) of the parameters from pos on, or None."""
        pos = skip_space(self.text, pos)
        if self.text.startswith(FUNCTION_CLOSE, pos):
            close = skip_space(self.text, pos + len(FUNCTION_CLOSE))
            if not self.text.startswith(CALL_CLOSE, close):
                return None
            after = skip_space(self.text, close + len(CALL_CLOSE))
            if self.whole and after < len(self.text) and not self.text.startswith("<tool_call>", after):
                return None
            return [], close + len(CALL_CLOSE)
        opened = self.name_at(pos)
        if opened is None or depth >= _MAX_PARAMS:
            return None
        name, start = opened
        start += self.text.startswith("\n", start)
        close = self.text.find(PARAM_CLOSE, start)
        while close >= 0 and self.tries > 0:
            after = close + len(PARAM_CLOSE)
            rest = None
            if self._may_follow(skip_space(self.text, after)):
                self.tries -= 1
                rest = self.params(after, depth + 1)
            if rest is not None:
                value = self.text[start:close]
                return [(name, value[:-1] if value.endswith("\n") else value)] + rest[0], rest[1]
            close = self.text.find(PARAM_CLOSE, close + 1)
        return None

    def _may_follow(self, pos: int) -> bool:
        return self.text.startswith(FUNCTION_CLOSE, pos) or self.name_at(pos) is not None


def read_function(text: str, pos: int, tools: list[dict]) -> Optional[tuple[dict, int]]:
    """({name, arguments}, index after </tool_call>) of the <function=...> at pos, or None when malformed.
    Readings that end the output (or reach the next call) come first, then ones with other text after the call."""
    end = text.find(">", pos + len(FUNCTION_OPEN))
    name = text[pos + len(FUNCTION_OPEN):end].strip() if end >= 0 else ""
    if not name or "\n" in name:
        return None
    schema = _properties(tools, name)
    for whole in (True, False):
        read = _Reader(text, whole).params(end + 1)
        if read is not None:
            params, after = read
            return {"name": name, "arguments": {key: typed_value(raw, schema.get(key)) for key, raw in params}}, after
    return None


def _properties(tools: list[dict], name: str) -> dict:
    """{parameter name: its schema} of the named tool (empty when unknown or without properties)."""
    for tool in tools:
        function = tool.get("function") or {}
        if function.get("name") == name:
            props = (function.get("parameters") or {}).get("properties") or {}
            return {key: value for key, value in props.items() if isinstance(value, dict)}
    return {}


def _types(schema: Optional[dict]) -> set:
    declared = (schema or {}).get("type")
    return {declared} if isinstance(declared, str) else set(declared) if isinstance(declared, list) else set()


def typed_value(raw: str, schema: Optional[dict]) -> Any:
    """A parameter's value: raw text for strings; otherwise strict JSON, or the Python literal Qwen models also
    write (True, False, None, {'k': 'v'}) where the schema's type asks for one, as vLLM's qwen3_coder parser
    reads them; anything else stays the text as written."""
    types = _types(schema)
    if types and types <= {"string"}:
        return raw
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


def _python_container(raw: str) -> Any:
    try:
        value = ast.literal_eval(raw.strip())
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return raw
    return value if isinstance(value, (dict, list)) else raw
