"""Gateway process: the arguments of a Hermes / Qwen3-Next JSON tool call being written ({"name": ..., "arguments":
{...}} after <tool_call>), as far as the text so far makes them certain, for tool_preview to stream: every argument
before the last one, and the last one's text while it is a string being written. The whole reading (tools.py) writes
a JSON call's object arguments with dump_arguments, so these pieces begin them."""
from __future__ import annotations

from typing import Optional

import jiter

from gateway.tools import dump_arguments, offered_name


def json_call_prefix(body: str, tools: list[dict], names: frozenset,
                     known: list[str]) -> Optional[tuple[str, list[str], Optional[tuple[str, str]]]]:
    """(the call's name, its certain '"key":value' pairs, the string argument being written as (key, text so far) or
    None) from the call's JSON text so far; None while its name is not known to be whole or the arguments are no
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
    if isinstance(arguments, str) and arguments.lstrip().startswith("{"):
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
    return name, pairs, last
