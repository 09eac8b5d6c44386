"""Gateway process: Ollama /api/chat messages and tools, read into what the chat template takes."""
from __future__ import annotations

from typing import Any, Optional

from gateway.errors import IMAGES_UNSUPPORTED, InvalidRequest, Unsupported
from gateway.openai_checks import check_tools
from gateway.responses_tools import whole_object

_ROLES = ("system", "developer", "user", "assistant", "tool")
# OpenAI's deprecated role for a function's result, named by the function: the tool message it is on /v1
# (gateway.legacy_functions). Clients written for that API send it to Ollama too (Qwen-Agent's function calling;
# ollama/ollama#6213), which answers 200.
_ROLE_ALIASES = {"function": "tool"}


def no_images(images: Any, param: str) -> None:
    """Raises Unsupported (Ollama's words, at `param`) when a message or request carries images: the model takes text
    only."""
    if images:
        raise Unsupported(IMAGES_UNSUPPORTED, param=param)


def _tool_call(call: Any, where: str) -> dict:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidRequest(f"{where}: each tool call needs function.name", param=where)
    arguments = function.get("arguments")
    arguments = {} if arguments is None or arguments == "" else arguments
    if not isinstance(arguments, dict) and not (isinstance(arguments, str) and whole_object(arguments)):
        # Ollama's api.ToolCallFunctionArguments is an ordered map decoded by buger/jsonparser's ObjectEach, whose
        # error for anything but an object Ollama answers (Xoshbin/asyar#513, openclaw/openclaw#50749).
        raise InvalidRequest("Value looks like object, but can't find closing '}' symbol", param=where)
    return {"type": "function", "function": {"name": function["name"], "arguments": arguments}}


def _role(message: Any, where: str) -> str:
    """The message's role in lower case, as Ollama's Message.UnmarshalJSON reads it ("User" is "user"); a `function`
    message is a `tool` one (_ROLE_ALIASES)."""
    role = message.get("role") if isinstance(message, dict) else None
    role = role.lower() if isinstance(role, str) else role
    role = _ROLE_ALIASES.get(role, role)
    if role not in _ROLES:
        raise InvalidRequest(f"{where}.role must be one of {', '.join(_ROLES + tuple(_ROLE_ALIASES))}, thinking",
                             param=f"{where}.role")
    return role


def read_message(message: Any, i: int) -> dict:
    """An /api/chat message as the chat template reads it (Ollama's `thinking`, `tool_name` under their names there)."""
    where = f"messages[{i}]"
    role = _role(message, where)
    no_images(message.get("images"), f"{where}.images")
    out = {"role": role, "content": message.get("content") or ""}
    if isinstance(message.get("thinking"), str) and message["thinking"]:
        out["reasoning_content"] = message["thinking"]
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [_tool_call(call, f"{where}.tool_calls") for call in calls]
    if role == "tool" and (message.get("tool_name") or message.get("name")):
        out["name"] = message.get("tool_name") or message.get("name")
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def read_messages(messages: list) -> list:
    """/api/chat `messages` as the chat template reads them (read_message each). A `thinking` message, Continue's
    role for a turn's reasoning, sent before that turn's assistant message in every later request (ollama/ollama#14202;
    Ollama's Qwen3.5 renderer leaves out a role it has no turn for), is read as the thinking of the assistant message
    that follows it, unless that message has its own; one that no assistant message follows is left out."""
    out, thought = [], ""
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if isinstance(role, str) and role.lower() == "thinking":
            content = message.get("content")
            thought += content if isinstance(content, str) else ""
            continue
        read = read_message(message, i)
        if thought and read["role"] == "assistant" and not read.get("reasoning_content"):
            read["reasoning_content"] = thought
        thought = ""
        out.append(read)
    if not out:
        raise InvalidRequest("messages holds only thinking messages: send the conversation they belong to",
                             param="messages")
    return out


def _without_nulls(value: Any) -> Any:
    """A tool definition with its null members left out, as Ollama's Go structs read a null (the field's zero value:
    no properties, no required list). Go clients built on ollama/api send a tool without parameters as
    {"type": "object", "properties": null}, which no JSON Schema validator takes."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def read_tools(tools: Any) -> Optional[list]:
    """/api/chat `tools` as the chat template and the call parser read them; None for none."""
    if not tools:
        return None
    if not isinstance(tools, list):
        raise InvalidRequest("tools must be a list", param="tools")
    out = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise InvalidRequest(f"tools[{i}].function.name is required", param=f"tools[{i}]")
        out.append({"type": "function", "function": _without_nulls(function)})
    check_tools(out)
    return out
