"""Gateway process: parses the model's <tool_call> XML (Qwen3.5 / Qwen3-Coder format) into OpenAI tool_calls.

Argument values are built by the standard json module, not orjson: orjson turns an integer beyond 64 bits into
a float (52353800001386185000 -> 5.2353800001386185e+19) and cannot write one back, so a call's arguments would
change value and type on the way to the client (load_json, dump_arguments).
"""
from __future__ import annotations

import json
import re
import secrets
from typing import Any, Optional

import orjson

TOOL_CALL_TAG = "<tool_call>"
_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FUNCTION_RE = re.compile(r"<function=([^>\n]+)>(.*?)</function>", re.DOTALL)
_PARAM_RE = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.DOTALL)


def load_json(text: str) -> Any:
    """Strict JSON as orjson reads it (no NaN, Infinity, 1e999 or lone surrogates: ValueError), but with every
    integer exact: orjson checks the text, the json module builds the value."""
    orjson.loads(text)
    return json.loads(text)


def _param_types(tools: list[dict], name: str) -> dict:
    for tool in tools:
        function = tool.get("function") or {}
        if function.get("name") == name:
            props = (function.get("parameters") or {}).get("properties") or {}
            return {key: (value or {}).get("type") for key, value in props.items() if isinstance(value, dict)}
    return {}


def _typed_value(raw: str, declared: Any) -> Any:
    """A parameter's value: raw text for strings, JSON for everything else when it parses."""
    if declared == "string" or (isinstance(declared, list) and declared == ["string"]):
        return raw
    try:
        return load_json(raw)
    except ValueError:   # not JSON (or an integer of more digits than int() takes): the text as written
        return raw


def _parse_one(body: str, tools: list[dict]) -> Optional[dict]:
    match = _FUNCTION_RE.search(body)
    if match:
        name = match.group(1).strip()
        types = _param_types(tools, name)
        args = {key.strip(): _typed_value(value, types.get(key.strip()))
                for key, value in _PARAM_RE.findall(match.group(2))}
        return {"name": name, "arguments": args}
    try:
        # Hermes / Qwen3 JSON form: {"name": ..., "arguments": {...}}
        obj = load_json(body)
    except ValueError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("name"), str):
        return {"name": obj["name"], "arguments": obj.get("arguments") or {}}
    return None


def dump_arguments(arguments) -> str:
    """Compact JSON text of parsed arguments (as orjson writes it), integers of any size kept exact."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def parse_tool_calls(text: str, tools: list[dict]) -> Optional[list[dict]]:
    """OpenAI tool_calls for every complete <tool_call> block in text; None when any block is malformed."""
    calls = []
    for body in _CALL_RE.findall(text):
        call = _parse_one(body, tools)
        if call is None:
            return None
        arguments = call["arguments"]
        calls.append({
            "id": f"call_{secrets.token_hex(12)}",
            "type": "function",
            "function": {"name": call["name"],
                         "arguments": arguments if isinstance(arguments, str) else dump_arguments(arguments)},
        })
    return calls or None


class ToolCallFilter:
    """Streams answer text up to the first <tool_call>, then buffers the calls to parse them whole.

    Whitespace and partial tags at the end of a piece are held back, so the answer text streamed
    before a call carries no trailing blank lines and never a fragment of the tag.
    """

    def __init__(self, tools: list[dict]):
        self._tools = tools
        self._held = ""
        self._calls_text: Optional[str] = None
        self._gap = ""          # whitespace held back before the first <tool_call>

    def push(self, text: str) -> str:
        if self._calls_text is not None:
            self._calls_text += text
            return ""
        buf = self._held + text
        pos = buf.find(TOOL_CALL_TAG)
        if pos >= 0:
            self._calls_text = buf[pos:]
            self._held = ""
            text = buf[:pos].rstrip()
            self._gap = buf[len(text):pos]
            return text
        keep = self._hold_len(buf)
        self._held = buf[len(buf) - keep:]
        return buf[:len(buf) - keep]

    def finish(self) -> tuple[str, Optional[list[dict]]]:
        """(text still to emit, tool calls or None). Unparseable call text is returned as text."""
        held, self._held = self._held, ""
        if self._calls_text is None:
            return held, None
        calls = parse_tool_calls(self._calls_text, self._tools)
        if calls is None:
            # Not a call after all: the text comes back whole, with the whitespace held before it.
            return self._gap + self._calls_text, None
        return "", calls

    @staticmethod
    def _hold_len(buf: str) -> int:
        for size in range(min(len(buf), len(TOOL_CALL_TAG) - 1), 0, -1):
            if TOOL_CALL_TAG.startswith(buf[-size:]):
                stripped = buf[:-size]
                return size + (len(stripped) - len(stripped.rstrip()))
        return len(buf) - len(buf.rstrip())
