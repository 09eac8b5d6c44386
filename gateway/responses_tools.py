"""Gateway process: a /v1/responses `tools` list and `tool_choice` -> the chat route's function tools, and back.

Function tools are served as they are. A `namespace` tool (how Codex CLI declares each MCP server, and its own
multi_agent_v1 group) holds function (and custom) tools that are offered to the model under one flat name,
`<namespace>__<name>` (the mcp__server__tool form models know); a call to such a name comes back as a function_call
item with `name` and `namespace` apart, as OpenAI returns it and Codex routes it. A freeform `custom` tool (Codex CLI's apply_patch) is
offered as a function of one string parameter, `input`, and its calls come back as custom_tool_call items of that
string, as LiteLLM's Responses bridge converts them (BerriAI/litellm#31571). Hosted tools (web_search, file_search,
mcp, ...) are left out with a warning logged once, as vLLM and llama.cpp leave them out.
"""
from __future__ import annotations

from typing import Any, Optional

from gateway.errors import InvalidRequest, Unsupported
from gateway.strict_json import load_json
from gateway.once_log import OnceLog
from gateway.openai_checks import TOOL_NAME_RE, tool_name_error

_skipped = OnceLog("ignoring Responses tools of types %s: only function tools (also inside a namespace) are served")


def flat_name(namespace: str, name: str) -> str:
    """The one name a namespaced function is offered under (Codex names its MCP namespaces mcp__server)."""
    return f"{namespace}{'' if namespace.endswith('__') else '__'}{name}"


def _skip(kind: str) -> None:
    _skipped.note([kind])


def _function(tool: dict, name: str, fallback_description: Optional[str] = None) -> dict:
    function = {key: tool[key] for key in ("description", "parameters", "strict") if tool.get(key) is not None}
    if "description" not in function and fallback_description:
        function["description"] = fallback_description
    return {"type": "function", "function": {"name": name, **function}}


def _namespace(tool: dict, where: str, out: list, namespaces: dict, paths: list, customs: set) -> None:
    """The namespace's function and custom tools, each under its flat name (400 for a name that cannot be one), and
    where each stands in the request."""
    namespace, members = tool.get("name"), tool.get("tools")
    if not isinstance(namespace, str) or not namespace or not isinstance(members, list):
        raise InvalidRequest(f"{where}: a namespace tool needs a name and a tools list", param=where)
    for j, member in enumerate(members):
        if not isinstance(member, dict):
            raise InvalidRequest(f"{where}.tools[{j}] must be an object", param=f"{where}.tools[{j}]")
        if member.get("type") not in ("function", "custom"):
            _skip(f"{member.get('type')} (in a namespace)")
            continue
        if not isinstance(member.get("name"), str):
            raise InvalidRequest(f"{where}.tools[{j}].name must be a string", param=f"{where}.tools[{j}].name")
        name = flat_name(namespace, member["name"])
        if not TOOL_NAME_RE.match(name):
            raise tool_name_error(name, f"{where}.tools[{j}].name", " (namespace and name, as the model is offered it)")
        namespaces[name] = (namespace, member["name"])
        if member["type"] == "custom":
            customs.add(name)
            member = _custom({**member, "name": name}, f"{where}.tools[{j}]")["function"]
        out.append(_function(member, name, tool.get("description")))
        paths.append(f"{where}.tools[{j}]")


def _custom(tool: dict, where: str) -> dict:
    """A custom tool as a function whose one parameter, input, is the freeform text the tool takes; a grammar format
    (lark or regex) is not enforced, but given to the model in the parameter's description."""
    if not isinstance(tool.get("name"), str) or not TOOL_NAME_RE.match(tool["name"]):
        raise tool_name_error(str(tool.get("name")), f"{where}.name", "")
    form = tool.get("format") or {}
    about = "The tool's input, as free text (no JSON around it)."
    if form.get("type") == "grammar" and isinstance(form.get("definition"), str):
        about += f" It follows this {form.get('syntax', '')} grammar:\n{form['definition']}"
    parameters = {"type": "object", "properties": {"input": {"type": "string", "description": about}},
                  "required": ["input"]}
    return _function({**tool, "parameters": parameters}, tool["name"])


def whole_object(arguments: str) -> bool:
    """Whether a streamed call's arguments read as the whole JSON object a call's are."""
    try:
        return isinstance(load_json(arguments), dict)
    except ValueError:
        return False


def custom_input(arguments: str) -> str:
    """A custom tool call's input: the `input` string of the function call's arguments (the text as it stands when
    they read as no such object: cut by max_output_tokens)."""
    try:
        value = load_json(arguments)
    except ValueError:
        return arguments
    return value["input"] if isinstance(value, dict) and isinstance(value.get("input"), str) else arguments


def custom_call_added(item: dict) -> dict:
    """A custom_tool_call item as output_item.added opens it: its input empty (the call's arguments are the
    function's, which the custom tool's caller never sees)."""
    return {**{key: value for key, value in item.items() if key != "arguments"}, "input": ""}


def custom_call_done(item: dict, where: dict) -> tuple[dict, list]:
    """(the finished custom_tool_call item, its input events): the input is the string of the function's one
    parameter, sent whole in one custom_tool_call_input.delta (the arguments' pieces are JSON, not the input's
    text), then custom_tool_call_input.done, as OpenAI streams a custom tool's call."""
    text = custom_input(item["arguments"])
    done = {**custom_call_added(item), "input": text}
    return done, [{"type": "response.custom_tool_call_input.delta", **where, "delta": text},
                  {"type": "response.custom_tool_call_input.done", **where, "input": text}]


def placed_tools(body: dict) -> list:
    """[(where it stands, tool)]: the top-level tools, then those of each `additional_tools` input item, in order.
    Codex CLI 0.144 and later send no top-level tools: theirs come in such an item (OpenAI's "additional tool
    definitions made available at this item"); they are offered as top-level ones are."""
    placed = [(f"tools[{i}]", tool) for i, tool in enumerate(body.get("tools") or [])]
    items = body.get("input") if isinstance(body.get("input"), list) else []
    for i, item in enumerate(items):
        if item.get("type") == "additional_tools":
            placed += [(f"input[{i}].tools[{j}]", tool) for j, tool in enumerate(item["tools"])]
    return placed


def chat_tools(placed: list) -> tuple[Optional[list], dict, list, set]:
    """(the chat route's function tools, {flat name: (namespace, name)} of the namespaced ones, where each chat tool
    stands in the request: "tools[1]", "tools[0].tools[2]"; hosted tools left out and namespaces shift the indexes;
    the names of the custom tools) for placed_tools' [(where, tool)]."""
    out: list = []
    namespaces: dict = {}
    paths: list = []
    customs: set = set()
    for where, tool in placed:
        if tool["type"] == "function":
            out.append(_function(tool, tool["name"]))
            paths.append(where)
        elif tool["type"] == "custom":
            out.append(_custom(tool, where))
            paths.append(where)
            customs.add(tool["name"])
        elif tool["type"] == "namespace":
            _namespace(tool, where, out, namespaces, paths, customs)
        else:
            _skip(tool["type"])
    return out or None, namespaces, paths, customs


def _function_choice(choice: dict) -> dict:
    """A function tool_choice (or an allowed_tools entry) as the chat route's; in a namespace, by its flat name."""
    name = choice.get("name")
    if isinstance(choice.get("namespace"), str) and choice["namespace"] and isinstance(name, str):
        name = flat_name(choice["namespace"], name)
    return {"type": "function", "function": {"name": name}}


def chat_tool_choice(choice: Any) -> Any:
    """tool_choice as the chat route's. allowed_tools keeps its function entries: the hosted tools it may list are
    not served, so with none left "auto" is "none" (no tool may be called) and "required" cannot be met."""
    if not isinstance(choice, dict):
        return choice
    if choice["type"] == "allowed_tools":
        functions = [_function_choice(tool) for tool in choice["tools"] if tool["type"] in ("function", "custom")]
        if functions:
            return {"type": "allowed_tools", "allowed_tools": {"mode": choice["mode"], "tools": functions}}
        if choice["mode"] == "auto":
            return "none"
        raise Unsupported("tool_choice.tools lists no function tool, and only function tools are served: "
                          "'required' cannot be met", param="tool_choice.tools")
    if choice["type"] not in ("function", "custom"):
        raise Unsupported(f"tool_choice of type '{choice['type']}' is not supported (none, auto, required, "
                          f"allowed_tools, or {{\"type\": \"function\" or \"custom\", \"name\": ...}})",
                          param="tool_choice")
    return _function_choice(choice)


def call_name(item: dict) -> str:
    """The name a function_call input item was offered under (its namespace joined back on)."""
    namespace = item.get("namespace")
    return flat_name(namespace, item["name"]) if isinstance(namespace, str) and namespace else item["name"]
