"""Gateway process: parses the model's <tool_call> blocks (Qwen3.5 / Qwen3-Coder XML, read by tool_markup, or the
Hermes JSON form) into OpenAI tool_calls, each block read by its structure up to its own </tool_call>.

Argument values are built by the standard json module, not orjson: orjson turns an integer beyond 64 bits into
a float (52353800001386185000 -> 5.2353800001386185e+19) and cannot write one back, so a call's arguments would
change value and type on the way to the client (load_json, dump_arguments).
"""
from __future__ import annotations

import json
import secrets
from typing import Optional

from gateway.tool_markup import CALL_CLOSE, FUNCTION_OPEN, load_json, read_function, skip_space
from gateway.tool_values import ToolParams

TOOL_CALL_TAG = "<tool_call>"


def _read_json_call(text: str, pos: int, open_end: bool) -> Optional[tuple[dict, int]]:
    """Hermes / Qwen3 JSON form {"name": ..., "arguments": {...}} at pos, read to its own end (a string in it may
    hold </tool_call>), then its </tool_call> (or the output's end, where the model ended it)."""
    try:
        _, end = json.JSONDecoder().raw_decode(text, pos)
        obj = load_json(text[pos:end])
    except (ValueError, RecursionError):
        return None
    close = skip_space(text, end)
    closed = text.startswith(CALL_CLOSE, close)
    if not (isinstance(obj, dict) and isinstance(obj.get("name"), str) and (closed or open_end and close == len(text))):
        return None
    return {"name": obj["name"], "arguments": obj.get("arguments") or {}}, close + len(CALL_CLOSE) * closed


def _read_call(text: str, pos: int, tools: list[dict], open_end: bool) -> Optional[tuple[dict, int]]:
    """(call, index after its </tool_call>) for the <tool_call> body starting at pos, or None when malformed."""
    start = skip_space(text, pos)
    if text.startswith("{", start):
        return _read_json_call(text, start, open_end)
    function = text.find(FUNCTION_OPEN, start)
    read = read_function(text, function, open_end) if function >= 0 else None
    if read is None:
        return None
    name, params, end = read
    return {"name": name, "arguments": ToolParams.of(tools, name).arguments(params)}, end


def dump_arguments(arguments) -> str:
    """Compact JSON text of parsed arguments (as orjson writes it), integers of any size kept exact."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def parse_tool_calls(text: str, tools: list[dict], open_end: bool = False) -> Optional[list[dict]]:
    """OpenAI tool_calls for every <tool_call> block in text; None when any block is malformed or unclosed.
    open_end: the model ended the output itself (finish_reason stop), so a last call whose </function> or
    </tool_call> it left out at the end is whole, as vLLM's qwen3_coder parser reads it; an output cut by
    max_tokens never is."""
    calls = []
    pos = text.find(TOOL_CALL_TAG)
    while pos >= 0:
        read = _read_call(text, pos + len(TOOL_CALL_TAG), tools, open_end)
        if read is None:
            return None
        call, end = read
        arguments = call["arguments"]
        calls.append({
            "id": f"call_{secrets.token_hex(12)}",
            "type": "function",
            "function": {"name": call["name"],
                         "arguments": arguments if isinstance(arguments, str) else dump_arguments(arguments)},
        })
        pos = text.find(TOOL_CALL_TAG, end)
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

    def finish(self, reason: Optional[str] = None) -> tuple[str, Optional[list[dict]]]:
        """(text still to emit, tool calls or None) at the end of the output, which `reason` ended. Unparseable call
        text is returned as text."""
        held, self._held = self._held, ""
        if self._calls_text is None:
            return held, None
        calls = parse_tool_calls(self._calls_text, self._tools, open_end=reason == "stop")
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
