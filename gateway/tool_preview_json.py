"""Gateway process: the arguments of a Hermes / Qwen3-Next JSON tool call being written ({"name": ..., "arguments":
{...}} after <tool_call>), as far as the text so far makes them certain, for tool_preview to stream: every argument
before the last one, and the last one's text while it is a string being written. The whole reading (tools.py) writes
a JSON call's object arguments with dump_arguments, so these pieces begin them."""
from __future__ import annotations

import json
from typing import Optional

import jiter

from gateway.tools import dump_arguments, offered_name


def json_call_prefix(body: str, tools: list[dict], names: frozenset,
                     known: list[str]) -> Optional[tuple[str, list[str], Optional[tuple[str, str]], bool]]:
    """(the call's name, its certain '"key":value' pairs, the string argument being written as (key, text so far) or
    None, whether the arguments are written as a JSON string's text) from the call's JSON text so far; None while its name is not known to be whole or the arguments are no
    object. known: the pairs an earlier read gave, which stand (only the later ones are written out)."""
    try:
        # trailing-strings: an unfinished string reads as its text so far, an unfinished key or value not at all.
        obj = jiter.from_json(body.encode(), partial_mode="trailing-strings")
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    key = "arguments" if "arguments" in obj else "parameters"
    # The name is whole once a later key has begun (it may still grow while it is the last one read).
    if not isinstance(obj.get("name"), str) or key not in obj:
        return None
    name, arguments = offered_name(tools, obj["name"]), obj[key]
    encoded = isinstance(arguments, str)
    if encoded and arguments.lstrip().startswith("{"):
        # Arguments written as the JSON text of an object (double-encoded): that text so far read the same way.
        try:
            arguments = jiter.from_json(arguments.encode(), partial_mode="trailing-strings")
        except ValueError:
            return None
    if name not in names or not isinstance(arguments, dict) or list(obj).index("name") > list(obj).index(key):
        return None
    items = list(arguments.items())
    # The last value read may still grow (a number, a list); a string's text so far is certainly its beginning.
    pairs = known[:len(items) - 1] + [dump_arguments({k: v})[1:-1] for k, v in items[len(known):-1]]
    last = items[-1] if items and isinstance(items[-1][1], str) else None
    return name, pairs, last, encoded


# An escape's text, character by character, where a JSON string may hold one: a backslash, then one of these or a
# \uXXXX; the low half of a surrogate pair, after its high half.
_ESCAPED = frozenset('"\\/bfnrtu')
_HEX = "0123456789abcdefABCDEF"
_LOW = ("\\", "u", "dD", "cdefCDEF", _HEX, _HEX)


def string_piece(raw: str) -> Optional[tuple[str, int]]:
    """(the text `raw` adds to the JSON string being written that it continues, how many of raw's characters that
    reads) where raw holds no closing quote nor control character (json.loads takes neither) and each escape reads
    alone; an escape raw ends inside (or a high surrogate whose low half may follow) is left for the next piece, as
    jiter's trailing-strings reading leaves it out. None for anything else: the whole call is read again
    (json_call_prefix)."""
    end, pos = len(raw), raw.find("\\")
    while pos >= 0:
        size = _escape_size(raw, pos)
        if size is None:
            return None
        if size == 0:
            end = pos
            break
        pos = raw.find("\\", pos + size)
    try:
        raw.encode()
        return json.loads('"' + raw[:end] + '"'), end
    except ValueError:
        return None


def _escape_size(raw: str, pos: int) -> Optional[int]:
    """The length of the escape at pos (a surrogate pair's both halves), 0 where raw ends inside it, None where it is
    none a JSON string takes, or a lone half of a surrogate pair."""
    head = raw[pos + 1:pos + 6]
    if not head:
        return 0
    if head[0] not in _ESCAPED:
        return None
    if head[0] != "u":
        return 2
    if not all(char in _HEX for char in head[1:]):
        return None
    if len(head) < 5:
        return 0
    code = int(head[1:], 16)
    if 0xDC00 <= code <= 0xDFFF:
        return None
    if code < 0xD800 or code > 0xDBFF:
        return 6
    low = raw[pos + 6:pos + 12]
    if not all(char in allowed for char, allowed in zip(low, _LOW)):
        return None
    return 12 if len(low) == 6 else 0


def escape_begins(text: str, start: int) -> Optional[int]:
    """Where an escape that text ends inside begins (from start on: an escape, a surrogate pair's both halves, is at
    most 12 characters), len(text) where it ends inside none, None where one from start is none a JSON string takes
    (start may fall in the middle of a pair)."""
    pos = text.find("\\", start)
    while pos >= 0:
        run = pos
        while run > 0 and text[run - 1] == "\\":
            run -= 1
        if (pos - run) % 2:
            pos = text.find("\\", pos + 1)     # this backslash is escaped by the one before it
            continue
        size = _escape_size(text, pos)
        if size is None:
            return None
        if size == 0:
            return pos
        pos = text.find("\\", pos + size)
    return len(text)
