"""Gateway process: jsonschema's error messages made fit to send back. jsonschema words an error with the repr of the
offending value ("'aaaa...' is not of type 'array'"), whole: a 30 MiB string sent as `messages` came back in a 30 MiB
error body, and a value deep in a tool schema filled the message with the whole subtree (vLLM #49239 is the same kind
of fault in pydantic's errors). Here the value is shortened with reprlib (the standard library's bounded repr)."""
from __future__ import annotations

import reprlib
from typing import Any

# The longest a message may get once the value is shortened (enum lists and patterns are ours, and short).
MAX_MESSAGE = 1000
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlist, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 2, 4, 4, 60, 60, 60


def short_repr(value) -> str:
    """repr(value), bounded: a long string keeps its ends, a deep or long container its first items."""
    return _SHORT.repr(value)


def error_message(error: Any) -> str:
    """A jsonschema ValidationError's (or SchemaError's) message with the offending value's repr shortened, at most
    MAX_MESSAGE characters."""
    message = error.message
    full = repr(error.instance)
    if len(full) > 60 and full in message:
        message = message.replace(full, short_repr(error.instance))
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "..."
