"""Gateway process: JSON out, as orjson writes it, but with every integer exact.

orjson refuses an integer outside [-2^63, 2^64) (TypeError: Integer exceeds 64-bit range), and the gateway keeps such
integers exact on the way in (web._rounded_integer): a tool argument the model wrote (Anthropic's tool_use input), a
request's schema bound or `max_tool_calls` that the Responses API repeats. Those answers were a 500, or a stream cut
by an HTTP 500 written into its chunks. Python's json writes them with every digit, as vLLM's (pydantic) answers do.
"""
from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> bytes:
    """value as compact UTF-8 JSON."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


_LINE_SEPARATORS = ("\u2028".encode(), "\u2029".encode())


def event_dumps(value: Any) -> bytes:
    """dumps for an SSE event's data line: U+2028 and U+2029 escaped (\\u2028, \\u2029; the same JSON). KoboldAI Lite
    reads each event with a JavaScript regex, /^data: ?(.*)(\\r?\\n){2}/m (index.html oai_api_stream_sse, and its
    KoboldCpp reader), whose `.` stops at them: an event holding one raw was skipped, its text lost. Python's
    json.dumps (KoboldCpp's, ensure_ascii) writes them escaped."""
    data = dumps(value)
    if b"\xe2\x80" in data:
        data = data.replace(_LINE_SEPARATORS[0], b"\\u2028").replace(_LINE_SEPARATORS[1], b"\\u2029")
    return data
