"""Gateway process: OpenAI's deprecated function calling (functions, function_call, the function role) read as tools."""
from __future__ import annotations

import re

from gateway.errors import ApiError, InvalidRequest, renamed
from gateway.schema_errors import short_repr
from gateway.schema_validate import empty_array

LEGACY_CALL_ID = "call_legacy_{}"   # the id an earlier turn's function_call gets (message index)
# The chat route's names of what a functions request sent under the deprecated ones, the most specific first.
_RENAMES = [(re.compile(r"\btools\[(\d+)\]\.function\b"), r"functions[\1]"),
            (re.compile(r"\btool_choice\.function\b"), "function_call"),
            (re.compile(r"\btool_choice\b"), "function_call"),
            (re.compile(r"\btools\b"), "functions")]


def legacy_functions(body: dict) -> dict:
    """A body with the deprecated `functions` / `function_call` translated into `tools` / `tool_choice` (one call a
    turn, as that API has), and earlier turns' `function_call` / `function` messages into tool calls and results."""
    body = _legacy_history(body)
    functions, call = body.get("functions"), body.get("function_call")
    if functions is None and call is None:
        return body
    if body.get("tools") is not None or body.get("tool_choice") is not None:
        raise InvalidRequest("use either tools/tool_choice or the deprecated functions/function_call, not both",
                             param="functions")
    if functions is not None and not isinstance(functions, list):
        raise InvalidRequest("functions must be a list of function objects", param="functions")
    if functions == []:
        # OpenAI's spec gives functions minItems 1, as it refuses tools: [].
        raise empty_array("functions")
    if call not in (None, "none") and not functions:
        # Named as the client sent it (translated, it was refused as tool_choice, a field it never sent).
        raise InvalidRequest("function_call needs a non-empty functions list: send functions, or leave function_call "
                             "out", param="function_call")
    out = {key: value for key, value in body.items() if key not in ("functions", "function_call")}
    if functions:
        out["tools"] = [{"type": "function", "function": f} for f in functions]
        out["parallel_tool_calls"] = False
    if isinstance(call, dict):
        out["tool_choice"] = {"type": "function", "function": call}
    elif call is not None:
        out["tool_choice"] = call
    return out


def _legacy_history(body: dict) -> dict:
    """An assistant turn's `function_call` as its one tool call, and a `function` message (its result, named by the
    function) as the `tool` message answering the latest call of that name, as OpenAI reads such a history."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(_is_legacy(m) for m in messages):
        return body
    out, ids = [], {}
    for i, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") == "assistant" and \
                isinstance(message.get("function_call"), dict) and not message.get("tool_calls"):
            call = message["function_call"]
            ids[_name(call.get("name"), f"messages[{i}].function_call.name")] = ids[None] = LEGACY_CALL_ID.format(i)
            message = {key: value for key, value in message.items() if key != "function_call"}
            message["tool_calls"] = [{"id": ids[None], "type": "function", "function": call}]
        elif isinstance(message, dict) and message.get("role") == "function":
            name = _name(message.get("name"), f"messages[{i}].name")
            call_id = ids.get(name, ids.get(None, LEGACY_CALL_ID.format(i)))
            message = {key: value for key, value in message.items() if key not in ("role", "name")}
            message.update(role="tool", tool_call_id=call_id)
        out.append(message)
    return {**body, "messages": out}


def _name(name, where: str):
    """A legacy turn's function name, which pairs a result with its call: a string (or absent); any other value is the
    400 naming the field sent, as the schema check names a wrong type (it was read as a dict key before any check)."""
    if name is not None and not isinstance(name, str):
        raise InvalidRequest(f"invalid value for '{where}': {short_repr(name)} is not of type \"string\"", param=where,
                             code="invalid_type")
    return name


def _is_legacy(message) -> bool:
    return isinstance(message, dict) and (message.get("role") == "function" or
                                          (message.get("role") == "assistant" and "function_call" in message))


def named_as_sent(exc: ApiError) -> ApiError:
    """exc, raised on the translated body, with tools / tool_choice named as the functions / function_call the
    request sent (in param and message): OpenAI names the field a client sent, and a client of the deprecated API
    never sent tools."""
    return renamed(exc, _RENAMES)
