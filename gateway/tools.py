"""Gateway process: parses the model's <tool_call> blocks (Qwen3.5 / Qwen3-Coder XML, read by tool_markup, or the
Hermes JSON form; also a bare <function=...> block of an offered tool) into OpenAI tool_calls, each block read by its
structure up to its own </tool_call>. The stream's side (answer text up to the first call, then the calls) is
gateway/tool_filter.py's ToolCallFilter.

Argument values are built by the standard json module, not orjson: orjson turns an integer beyond 64 bits into
a float (52353800001386185000 -> 5.2353800001386185e+19) and cannot write one back, so a call's arguments would
change value and type on the way to the client (load_json, dump_arguments).
"""
from __future__ import annotations

import json
import secrets
from typing import Optional

from gateway.strict_json import load_json
from gateway.tool_fences import Fences
from gateway.tool_markup import (CALL_CLOSE, FUNCTION_CLOSE, FUNCTION_OPEN, names_function, prose_then_call,
                                  read_function, skip_space, stray_text_end)
from gateway.tool_json_repair import healed_json
from gateway.tool_values import ToolParams

TOOL_CALL_TAG = "<tool_call>"
# Where a call starts: its <tool_call>, or a bare <function=NAME> where Qwen3-Coder / Qwen3.6 drop the wrapper at
# times (ollama/ollama#16686, #18530); vLLM's qwen3_coder parser reads those too. A bare one counts only when NAME
# is an offered tool and the call reads whole, else it stays text.
CALL_STARTS = (TOOL_CALL_TAG, FUNCTION_OPEN)
# What follows a <tool_call> that opens a call: the XML function form or the Hermes JSON form (as the reasoning
# splitter reads a <tool_call> in the thinking). Prose that mentions the tag is answer text, streamed as it comes
# (a stream held everything after such a mention to its end: club-3090#72, vllm#22975).
_CALL_BODIES = (FUNCTION_OPEN, "{")


def _read_json_call(text: str, pos: int, open_end: bool, tools: list[dict],
                    eos: bool = False) -> Optional[tuple[dict, int]]:
    """Hermes / Qwen3 JSON form {"name": ..., "arguments": {...}} at pos, read to its own end (a string in it may
    hold </tool_call>), then its </tool_call> (or the output's end, where the model ended it); the name as the
    offered tool spells it (offered_name). A closing brace written once too often is markup, and so is other text
    the model wrote after the object in its block (stray_text_end: the call is the object, as a stream sent it);
    what healed_json (gateway/tool_json_repair.py) reads is the call too."""
    try:
        _, end = json.JSONDecoder().raw_decode(text, pos)
        obj = load_json(text[pos:end])
    except (ValueError, RecursionError):
        obj, end = healed_json(text, pos, open_end and eos)
    close = skip_space(text, end)
    while text.startswith("}", close):
        close = skip_space(text, close + 1)
    closed = text.startswith(CALL_CLOSE, close)
    stray = None if closed else stray_text_end(text, close)
    if stray is not None:
        close, closed = stray - len(CALL_CLOSE), True
    # A </tool_call> the end token cut is markup, as in the XML form (tool_markup's cut_tag).
    at_end = close == len(text) or eos and CALL_CLOSE.startswith(text[close:close + len(CALL_CLOSE)])
    # Where the model ended the output with no </tool_call> after the object, the call is the object and what it
    # wrote after it is read as after any call (answer text, the next call), as a stream sent the call by then.
    if not (isinstance(obj, dict) and isinstance(obj.get("name"), str) and (closed or open_end)):
        return None
    # Llama-style calls name them "parameters" (Ollama's JSON call parser and vLLM's llama3_json take both).
    arguments = _object_arguments(obj["arguments"] if "arguments" in obj else obj.get("parameters"))
    return None if arguments is None else ({"name": offered_name(tools, obj["name"]), "arguments": arguments},
                                           len(text) if at_end and not closed else close + len(CALL_CLOSE) * closed)


def offered_name(tools: list[dict], name: str) -> str:
    """The client's own spelling of a tool name the model wrote: `name` when a tool of that name is offered, else the
    one offered tool whose name equals it ignoring case (Qwen3.8 writes Read for an offered read: the released
    engine's fallback, 0.5.6 release notes and ../shared/research/seed-engine.md 2.7), else `name` as written (no
    such tool, or two offered names that differ only in case)."""
    names = [(tool.get("function") or {}).get("name") for tool in tools]
    if name in names:
        return name
    folded = name.casefold()
    matches = [other for other in names if isinstance(other, str) and other.casefold() == folded]
    return matches[0] if len(matches) == 1 else name


def _object_arguments(value):
    """A JSON call's arguments: an object, or the JSON text of one (read as the object, so they are written as an
    object's are and stream so: tool_preview_json); absent or empty is {}. Anything else (a list, a bare string, a
    number) is no call's arguments: Ollama's calls carry an object (its clients validate one) and its parser finds no
    call then, so the block stays text (None)."""
    if not value:
        return {}
    if isinstance(value, str):
        try:
            value = load_json(value)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def opens_call(text: str, pos: int) -> Optional[bool]:
    """Whether the call start at pos opens a call: a bare <function=NAME> that a line break or a tag follows, and a
    <tool_call> where <function= or a JSON object's first key follows it (past whitespace), unless the function's
    name is none (names_function); where other text follows, it is only a mention, answer text (False: "use
    <function=read> to ...", "<tool_call>{...}"); None while the text ends before that shows."""
    if not text.startswith(TOOL_CALL_TAG, pos):
        named = names_function(text, pos + len(FUNCTION_OPEN))
        return _body_follows(text, text.find(">", pos) + 1, " \t", "\r\n<") if named else named
    after = skip_space(text, pos + len(TOOL_CALL_TAG))
    while text.startswith(TOOL_CALL_TAG, after):
        # The tag written twice: the call starts at the first.
        after = skip_space(text, after + len(TOOL_CALL_TAG))
    rest = text[after:][:len(FUNCTION_OPEN)]
    if rest.startswith(FUNCTION_OPEN):
        return names_function(text, after + len(FUNCTION_OPEN))
    if rest.startswith("{"):
        return _body_follows(text, after + 1, " \t\r\n", '"')
    return None if any(body.startswith(rest) for body in _CALL_BODIES + (TOOL_CALL_TAG,)) else False


def _body_follows(text: str, pos: int, skipped: str, starts: str) -> Optional[bool]:
    """Whether the first character from pos not in `skipped` is one of `starts`, as a call's body begins there (a
    bare <function=NAME>'s line break or first tag, a JSON call's first key); None while the text ends first. A
    stream held everything after a mention that failed this to the answer's end (club-3090#72's silence)."""
    while pos < len(text) and text[pos] in skipped:
        pos += 1
    return None if pos == len(text) else text[pos] in starts


def next_call(text: str, start: int = 0, fences: Optional[Fences] = None) -> int:
    """Index of the next call start (see CALL_STARTS) from start that is no mere mention of the tag and stands in no
    fenced code block (a call the model shows in one is an example of the format, answer text, as vLLM's Qwen3
    parser reads it: gateway/tool_fences.py), or -1. fences: those of the answer text before start (none open)."""
    fences, read = Fences() if fences is None else fences.copy(), start
    while True:
        found = [pos for pos in (text.find(tag, start) for tag in CALL_STARTS) if pos >= 0]
        if not found:
            return -1
        fences.feed(text[read:min(found)])
        read = min(found)
        if fences.opened is None and opens_call(text, min(found)) is not False:
            return min(found)
        start = min(found) + len(TOOL_CALL_TAG)


def _read_call(text: str, pos: int, tools: list[dict], open_end: bool,
               lenient: bool = True, eos: bool = False) -> Optional[tuple[dict, int]]:
    """(call, index after it) for the call starting at pos (its <tool_call>, or a bare <function=), or None when
    malformed; lenient: the output is whole, eos: the model's end token ended it (see read_function)."""
    bare = not text.startswith(TOOL_CALL_TAG, pos)
    start = pos if bare else skip_space(text, pos + len(TOOL_CALL_TAG))
    while not bare and text.startswith(TOOL_CALL_TAG, start):
        # The tag written twice: the call starts at the first (opens_call), a JSON one too.
        start = skip_space(text, start + len(TOOL_CALL_TAG))
    if text.startswith("{", start):
        return _read_json_call(text, start, open_end, tools, eos)
    function = text.find(FUNCTION_OPEN, start)
    read = read_function(text, function, open_end, _param_names(tools), lenient, eos) if function >= 0 else None
    if read is None:
        return None
    name, params, end = read
    name = offered_name(tools, name)
    if bare and name not in {(tool.get("function") or {}).get("name") for tool in tools}:
        return None
    return {"name": name, "arguments": ToolParams.of(tools, name).arguments(params)}, end


def _param_names(tools: list[dict]):
    """name -> the parameter names the tool of that name declares (None when it declares none)."""
    return lambda name: frozenset(ToolParams.of(tools, offered_name(tools, name)).props) or None


def dump_arguments(arguments) -> str:
    """Compact JSON text of parsed arguments (as orjson writes it), integers of any size kept exact."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def _openai_call(call: dict) -> dict:
    arguments = call["arguments"]
    return {"id": f"call_{secrets.token_hex(12)}", "type": "function",
            "function": {"name": call["name"],
                         "arguments": arguments if isinstance(arguments, str) else dump_arguments(arguments)}}


def read_tool_calls(text: str, tools: list[dict], open_end: bool = False,
                    after_calls: bool = False, eos: bool = False) -> Optional[tuple[list[dict], str]]:
    """(OpenAI tool_calls for every <tool_call> block in text, the text outside them), None when any block is malformed
    or unclosed. The text the model wrote between and after its calls is answer text, each piece without the
    whitespace beside a call, joined as Ollama's parser joins them (model/parsers/qwen3coder.go) and as vLLM's
    qwen3_coder streams it. open_end: the model ended the output itself (finish_reason stop), so a last call
    whose </function> or </tool_call> it left out at the end is whole, as vLLM's qwen3_coder parser reads it; an
    output cut by max_tokens never is; eos: the model's end token (not a stop string) ended it, so a value left
    open at the end ends there, as that parser reads it too. after_calls: text follows calls already read
    (ToolCallFilter.take_ready)."""
    read = read_call_pieces(text, tools, open_end, after_calls, eos)
    return None if read is None else (read[0], "".join(read[1]))


def read_call_pieces(text: str, tools: list[dict], open_end: bool = False, after_calls: bool = False,
                     eos: bool = False) -> Optional[tuple[list[dict], list[str]]]:
    """read_tool_calls' calls and the text around them in the model's order: [before the first call, after the
    first, ..., after the last], each piece stripped; None as there."""
    calls, pieces, end, stop = [], [], 0, len(text)
    pos = next_call(text)
    while pos >= 0:
        if eos and cut_opener(text, pos):
            stop = pos          # the next call's opener the end token cut: markup, not answer text
            break
        read = _read_call(text, pos, tools, open_end, eos=eos)
        if read is None and (calls or after_calls) and not text.startswith(TOOL_CALL_TAG, pos):
            break               # a bare <function= in the prose after the calls: that prose is not part of them
        if read is None:
            return None
        pieces.append(_without_stray_closers(text[end:pos]) if calls else text[end:pos])
        call, end = read
        calls.append(_openai_call(call))
        pos = next_call(text, end)
    pieces.append(_without_stray_closers(text[end:stop]))
    return (calls, [piece.strip() for piece in pieces]) if calls else None


def cut_opener(text: str, pos: int) -> bool:
    """Whether the text from pos to the output's end is a call's opener that the model's end token cut: <tool_call>
    and, after it, nothing or the start of its <function=NAME> without the '>'. No call can be read from it, and it
    is markup, not answer text: vLLM's qwen3_coder streams nothing of it (a call goes out once its name's '>' is
    read) and Ollama's parser drops an open call's text (model/parsers/qwen3coder.go)."""
    if not text.startswith(TOOL_CALL_TAG, pos):
        return False
    rest = text[pos + len(TOOL_CALL_TAG):].lstrip()
    if FUNCTION_OPEN.startswith(rest):
        return True
    return rest.startswith(FUNCTION_OPEN) and not {">", "\n"} & set(rest)


def _without_stray_closers(text: str) -> str:
    """Text after a call without the closing tags a model repeats there (a second </tool_call> or </function>):
    markup, not answer text."""
    text = text.lstrip()
    while text.startswith((CALL_CLOSE, FUNCTION_CLOSE)):
        text = text[len(CALL_CLOSE if text.startswith(CALL_CLOSE) else FUNCTION_CLOSE):].lstrip()
    return text


def parse_tool_calls(text: str, tools: list[dict], open_end: bool = False,
                     after_calls: bool = False) -> Optional[list[dict]]:
    """The tool_calls of read_tool_calls (None when any block is malformed or unclosed)."""
    read = read_tool_calls(text, tools, open_end, after_calls)
    return None if read is None else read[0]


def ready_call(text: str, tools: list[dict]) -> Optional[tuple[dict, int]]:
    """(call, where what follows it starts) for the call text starts with, when it reads whole and the next call has
    begun after it (or answer text, then the next call: prose_then_call): only the next call's start (not the
    output's end, which more text may move) proves that a </tool_call> closes this call rather than sits in one of
    its values; None until then. A closing tag the model repeated after the call (a second </tool_call>) is
    markup between them, as read_call_pieces reads it: the stream held such a call to the output's end."""
    read = _read_call(text, 0, tools, open_end=False, lenient=False)
    if read is None:
        return None
    after = skip_space(text, read[1], (CALL_CLOSE, FUNCTION_CLOSE))
    if not (text.startswith(CALL_STARTS, after) or prose_then_call(text, after)):
        return None
    return _openai_call(read[0]), after


def calls_after_prose(text: str, tools: list[dict], reason: Optional[str],
                       eos: bool) -> Optional[tuple[str, list]]:
    """(prose, calls) when text starts with a bare <function= that is no call (prose showing the syntax) and the
    calls after it read whole, as vLLM's qwen3_coder parser reads the <tool_call> blocks wherever they are and keeps
    the text before them as content; None otherwise."""
    if text.startswith(TOOL_CALL_TAG):
        return None
    pos = next_call(text, 1)
    while pos > 0:
        read = read_tool_calls(text[pos:], tools, open_end=reason == "stop", eos=eos)
        if read is not None:
            return text[:pos].rstrip() + read[1], read[0]
        pos = -1 if text.startswith(TOOL_CALL_TAG, pos) else next_call(text, pos + 1)
    return None
