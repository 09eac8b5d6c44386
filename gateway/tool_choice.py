"""Gateway process: the chat route's tool_choice, its schema and what it asks for (the tools whose calls are parsed,
and whether a call is forced), OpenAI's allowed_tools included."""
from __future__ import annotations

from typing import Optional

from gateway.errors import InvalidRequest

_NAMED = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}

TOOL_CHOICE = {
    "anyOf": [
        {"enum": ["none", "auto", "required", None]},
        {"type": "object", "required": ["type", "function"],
         "properties": {"type": {"const": "function"}, "function": _NAMED}},
        # OpenAI's allowed_tools: every tool stays in the prompt, the model may call only these ("auto": or answer).
        {"type": "object", "required": ["type", "allowed_tools"],
         "properties": {"type": {"const": "allowed_tools"},
                        "allowed_tools": {"type": "object", "required": ["mode", "tools"],
                                          "properties": {"mode": {"enum": ["auto", "required"]},
                                                         "tools": {"type": "array", "minItems": 1,
                                                                   "items": {"type": "object", "required": ["type"],
                                                                             "properties": {"function": _NAMED}}}}}}},
    ],
}


def _allowed(tools: Optional[list], spec: dict) -> tuple[Optional[list], Optional[str]]:
    """(the offered tools allowed_tools lists, "" when its mode is required else None); 400 for a listed function
    that is not offered, or a tool that is no function (OpenAI's hosted tools are not served here)."""
    offered = {t["function"]["name"]: t for t in tools or []}
    allowed = []
    for i, tool in enumerate(spec["tools"]):
        where = f"tool_choice.allowed_tools.tools[{i}]"
        if tool["type"] != "function" or "function" not in tool:
            raise InvalidRequest(f"{where} must be a function tool ({{\"type\": \"function\", \"function\": "
                                 f"{{\"name\": ...}}}}); only function tools are served", param=where)
        name = tool["function"]["name"]
        if name not in offered:
            raise InvalidRequest(f"{where} names the function '{name}', which is not in tools",
                                 param=f"{where}.function.name")
        allowed.append(offered[name])
    return allowed, "" if spec["mode"] == "required" else None


def allows_listed_only(body: dict) -> bool:
    """Whether tool_choice is allowed_tools: tool_mode's tools are then the only ones whose calls are calls."""
    choice = body.get("tool_choice")
    return isinstance(choice, dict) and choice.get("type") == "allowed_tools"


def tool_mode(body: dict) -> tuple[Optional[list], Optional[str]]:
    """(tools whose calls are parsed, forced function: None = not forced, "" = any of those tools, else its name)."""
    tools = body.get("tools") or None
    choice = body.get("tool_choice")
    if allows_listed_only(body):
        return _allowed(tools, choice["allowed_tools"])
    if isinstance(choice, dict):
        name = choice["function"]["name"]
        if name not in [t["function"]["name"] for t in tools or []]:
            raise InvalidRequest(f"tool_choice names the function '{name}', which is not in tools",
                                 param="tool_choice")
        return tools, name
    if choice == "required":
        if not tools:
            raise InvalidRequest("tool_choice 'required' needs a non-empty tools list", param="tool_choice")
        return tools, ""
    if choice == "none":
        return None, None
    if choice == "auto" and not tools:
        # vLLM's check_tool_usage and OpenAI refuse it too ("none" without tools passes, as vLLM lets it).
        raise InvalidRequest("tool_choice 'auto' needs a non-empty tools list: send tools, or leave tool_choice out",
                             param="tool_choice")
    return tools, None


_CUSTOM = ("OpenAI's custom (freeform) tools are not served by the chat completions API here, which takes function "
           "tools only, as vLLM's does: offer it as a function (one string parameter), or send the request to "
           "/v1/responses, which serves custom tools")


def _refuse_custom(body: dict) -> None:
    """400 naming a Chat Completions custom tool, a custom tool_choice or an earlier custom tool call (openai-python
    ChatCompletionCustomToolParam, ChatCompletionNamedToolChoiceCustomParam, ChatCompletionMessageCustomToolCall),
    where the schema said only "'tools[0].function' is a required property" (a client read it as a function it left
    out: microsoft/foundry-local#1080, JiuliNuoyi/CodexRosetta#1 for Codex CLI's apply_patch)."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        if isinstance(tool, dict) and tool.get("type") == "custom":
            raise InvalidRequest(f"tools[{i}]: {_CUSTOM}", param=f"tools[{i}].type")
    if isinstance(choice, dict) and choice.get("type") == "custom":
        raise InvalidRequest(f"tool_choice: {_CUSTOM}", param="tool_choice.type")
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for j, call in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(call, dict) and call.get("type") == "custom":
                raise InvalidRequest(f"messages[{i}].tool_calls[{j}]: {_CUSTOM}",
                                     param=f"messages[{i}].tool_calls[{j}].type")


def function_types(body):
    """A chat body whose tools, and named tool_choice, that leave out "type" are function ones, as vLLM's
    ChatCompletionToolsParam and ChatCompletionNamedToolChoiceParam default it ("function"); OpenAI requires it.
    Custom tools are refused by name (_refuse_custom)."""
    if not isinstance(body, dict):
        return body
    _refuse_custom(body)
    tools, choice = body.get("tools"), body.get("tool_choice")
    out = body
    if isinstance(tools, list) and any(_untyped(tool) for tool in tools):
        out = {**out, "tools": [{"type": "function", **tool} if _untyped(tool) else tool for tool in tools]}
    if _untyped(choice):
        out = {**out, "tool_choice": {"type": "function", **choice}}
    return out


def _untyped(entry) -> bool:
    """A tool or tool_choice object with a "function" and no "type" key."""
    return isinstance(entry, dict) and "type" not in entry and "function" in entry
