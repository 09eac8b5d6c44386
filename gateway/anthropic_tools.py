"""Gateway process: Anthropic's tool definitions as OpenAI functions: a custom tool's input_schema, and the schema of
each Anthropic-defined client tool (bash, text editor, memory), which a request names by its versioned type alone."""
from __future__ import annotations

import re
from typing import Optional

from gateway.errors import InvalidRequest, Unsupported

_PATH = {"type": "string", "description": "Absolute path of the file or directory."}
_LINES = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
          "description": "view: [first, last] line to show, 1-based; -1 as last reads to the end of the file."}
_EDIT = {
    "file_text": {"type": "string", "description": "create: the content of the new file."},
    "old_str": {"type": "string", "description": "str_replace: the exact text to replace (it must occur once)."},
    "new_str": {"type": "string", "description": "str_replace: the replacement text."},
    "insert_line": {"type": "integer", "description": "insert: the line after which the text goes (0: the start)."},
}


def _editor(commands: list, insert_text: str, description: str, **more: dict) -> dict:
    """An editor tool's definition: `command` one of commands, the edit fields, insert's text under insert_text
    (the text editor's new_str, which str_replace reads too; the memory tool's insert_text)."""
    shared = insert_text == "new_str"
    text = {insert_text: {"type": "string", "description": ("str_replace: the replacement text; " if shared else "")
                          + "insert: the text to insert."}}
    schema = {"type": "object", "required": ["command"],
              "properties": {"command": {"type": "string", "enum": commands}, "path": _PATH,
                             "view_range": _LINES, **_EDIT, **text, **more}}
    return {"description": description, "input_schema": schema}


_BASH = {"description": "Run a command in a persistent bash shell and return its output.",
         "input_schema": {"type": "object", "properties": {
             "command": {"type": "string", "description": "The bash command to run (needed unless restart is true)."},
             "restart": {"type": "boolean", "description": "true restarts the shell."}}}}
_EDITOR = ("View, create and edit text files: view a file (its lines numbered) or a directory, create a file, "
           "replace a unique string, insert text after a line")
_MEMORY = _editor(["view", "create", "str_replace", "insert", "delete", "rename"], "insert_text",
                  "Your memory directory (/memories), kept across conversations: view, create, edit, delete and "
                  "rename its files. Look at it before you start a task.",
                  old_path={"type": "string", "description": "rename: the current path."},
                  new_path={"type": "string", "description": "rename: the new path."})
# undo_edit is in the editor's first two versions only; later ones (text_editor_20250429 on) leave it out.
_UNDO_VERSIONS = ("20241022", "20250124")
_CLIENT_TYPE = re.compile(r"(bash|text_editor|memory)_(\d{8})")


def client_tool(kind: str) -> Optional[dict]:
    """The definition (description, input_schema) of an Anthropic-defined client tool type such as bash_20250124,
    text_editor_20250728 or memory_20250818, as Anthropic's tool docs give their inputs; None for another type.
    The client runs these tools, so the model here is offered them as functions and its calls go back as tool_use
    blocks of the name the request gave (Ollama and llama.cpp accept such a tool without input_schema too)."""
    match = _CLIENT_TYPE.fullmatch(kind)
    if match is None:
        return None
    family, version = match.groups()
    if family == "bash":
        return _BASH
    if family == "memory":
        return _MEMORY
    commands = ["view", "create", "str_replace", "insert"] + (["undo_edit"] if version in _UNDO_VERSIONS else [])
    return _editor(commands, "new_str", _EDITOR + (", undo the last edit" if "undo_edit" in commands else "") + ".")


def definition(tool: dict) -> dict:
    """A tool as the OpenAI function's name, description and parameters: a custom tool's input_schema (one without
    "type", as MCP servers send some, is the object schema it describes, as vLLM's AnthropicTool and Ollama read it),
    or an Anthropic-defined client tool's own schema (its description unless the request gave one)."""
    builtin = client_tool(tool.get("type") or "")
    if builtin is not None:
        return {"name": tool["name"], "description": tool.get("description") or builtin["description"],
                "parameters": builtin["input_schema"]}
    # Without a description the function has none (not "description": null), as the same tool sent to /v1 has none.
    described = {"description": tool["description"]} if tool.get("description") is not None else {}
    return {"name": tool["name"], **described, "parameters": {"type": "object", **tool["input_schema"]}}


def check_tool(tool: dict, i: int) -> None:
    """A tool the request may offer: a custom one with input_schema, or an Anthropic-defined client tool. Anthropic's
    server tools (web_search_*, web_fetch_*, code_execution_*, ...) run on Anthropic's side, and computer use needs
    screenshots a text model cannot read: refused, never dropped (an answer would seem to have used them)."""
    kind = tool.get("type")
    if kind not in (None, "custom") and client_tool(kind) is None:
        raise Unsupported(f"tools.{i}.type: tool type '{kind}' is not supported: only custom tools (name, "
                          f"description, input_schema) and Anthropic's bash, text editor and memory client tools are "
                          f"served here (server tools such as web search run on Anthropic's side)",
                          param=f"tools.{i}.type")
    if kind in (None, "custom") and "input_schema" not in tool:
        raise InvalidRequest(f"tools.{i}.input_schema: Field required", param=f"tools.{i}.input_schema")
