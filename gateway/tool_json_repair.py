"""Gateway process: the JSON (Hermes) tool call a model wrote slightly wrong, read as the call it meant, for
gateway/tools.py's reading: what strict JSON refuses but a stream's partial reading (tool_preview_json) took."""
from __future__ import annotations

import json

import jiter

from gateway.tool_markup import CALL_CLOSE, skip_space


def _without_trailing_commas(body: str) -> str:
    """body without a comma that a closing } or ] follows outside strings ({"city": "Paris",}: a Python habit models
    keep, which a stream's partial reading took and strict JSON refuses)."""
    kept, in_string, escaped = [], False, False
    for i, char in enumerate(body):
        if in_string:
            in_string, escaped = (escaped or char != '"'), (not escaped and char == "\\")
        elif char == '"':
            in_string = True
        elif char == "," and body[skip_space(body, i + 1):skip_space(body, i + 1) + 1] in ("}", "]"):
            continue
        kept.append(char)
    return "".join(kept)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is no JSON")


def healed_json(text: str, pos: int, eos: bool) -> tuple[object, int]:
    """(the object, where its text ends) of a JSON call a model wrote wrong, up to its first </tool_call> or the end of
    an output its end token ended (a stop string cut it: no call): line breaks or tabs raw inside a string (a file's
    text), a trailing comma, and the object's last closing braces left out (hermes-agent#5315: qwen3.5-122b writes
    <tool_call>{"name": "terminal", "arguments": {"command": "ls -la"}</tool_call>, and the call was lost as text). A
    stream had sent such a call as it read it (tool_preview_json), so the whole reading now agrees with it; (None,
    pos) where it still reads as no object."""
    close = text.find(CALL_CLOSE, pos)
    if close < 0 and not eos:
        return None, pos
    body = text[pos:close if close >= 0 else len(text)].rstrip()
    decoder = json.JSONDecoder(strict=False, parse_constant=_refuse_constant)
    for written in dict.fromkeys((body, _without_trailing_commas(body))):
        for num_braces in range(3):
            try:
                return decoder.decode(written + "}" * num_braces), pos + len(body)
            except (ValueError, RecursionError):
                continue
    if close >= 0:
        return None, pos
    # The end token ended the object inside a key or value: the call as far as it was written, a string's text so
    # far, as the XML form's value runs to the output's end and as a stream sent it (tool_preview_json's reading).
    try:
        obj = jiter.from_json(body.encode(), partial_mode="trailing-strings")
        whole_name = jiter.from_json(body.encode(), partial_mode="on").get("name")
    except (ValueError, AttributeError):
        return None, pos
    # Only a name that is whole and that the arguments follow, as a stream begins a JSON call.
    named = obj.get("name") == whole_name and ("arguments" in obj or "parameters" in obj)
    return (obj, pos + len(body)) if named else (None, pos)
