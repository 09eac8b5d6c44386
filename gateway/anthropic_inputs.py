"""Gateway process: a tool_use block's input object from a call's arguments JSON, whole or cut (MessageBuilder)."""
from __future__ import annotations

import jiter

from gateway.tools import load_json


def tool_input(arguments: str) -> dict:
    """A parsed call's arguments as the tool_use input object ({} when the model wrote no object)."""
    try:
        value = load_json(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def cut_input(arguments: str) -> dict:
    """The input of a tool_use block max_tokens or a stop string cut: the members its partial JSON completed, as
    Anthropic's SDKs rebuild a streamed block's input (lib/streaming/_messages.py: jiter's from_json with
    partial_mode), so the whole message's block is the one a client builds from the stream."""
    try:
        value = jiter.from_json(arguments.encode(), partial_mode=True)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
