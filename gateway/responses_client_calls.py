"""Gateway process: the Responses API's calls of the tools OpenAI defines and the client runs (local_shell, shell,
apply_patch) and their outputs, as the function_call / function_call_output items gateway.responses_input reads.

A client replays them in every later request of a thread begun with OpenAI (the Agents SDK's ShellTool and
ApplyPatchTool, codex-mini's local_shell); the tools themselves are not offered here (gateway.responses_tools leaves
them out), but the history reads as what happened: a call of `local_shell`, `shell` or `apply_patch` whose arguments
are its action or operation, then its output. OpenAI's item shapes: openai-python
src/openai/types/responses/response_input_item_param.py (LocalShellCall / LocalShellCallOutput, ShellCall /
ShellCallOutput, ApplyPatchCall / ApplyPatchCallOutput).
"""
from __future__ import annotations

import json

from gateway.errors import InvalidRequest

# item type -> (the function it is a call of, the field its arguments are)
_CALLS = {"local_shell_call": ("local_shell", "action"), "shell_call": ("shell", "action"),
          "apply_patch_call": ("apply_patch", "operation")}
OUTPUTS = ("local_shell_call_output", "shell_call_output", "apply_patch_call_output")
CALLS = tuple(_CALLS)


def _call_id(item: dict) -> object:
    """Its call_id; a local_shell_call_output names its call by `id` (OpenAI's LocalShellCallOutput)."""
    return item["call_id"] if "call_id" in item else item.get("id")


def as_function_call(item: dict, where: str) -> dict:
    """The function_call item a client-run tool's call reads as (400 when its action / operation is no object)."""
    name, field = _CALLS[item["type"]]
    arguments = item.get(field)
    if not isinstance(arguments, dict):
        raise InvalidRequest(f"{where}.{field} must be an object", param=f"{where}.{field}")
    return {"type": "function_call", "call_id": _call_id(item), "name": name,
            "arguments": json.dumps(arguments, ensure_ascii=False)}


def as_function_call_output(item: dict, where: str) -> dict:
    """The function_call_output item a client-run tool's output reads as: local_shell's text as sent; shell's list of
    {stdout, stderr, outcome} results as their JSON; apply_patch's output text, or its status where it has none."""
    output = item.get("output")
    if item["type"] == "shell_call_output" and isinstance(output, list):
        output = json.dumps(output, ensure_ascii=False)
    elif item["type"] == "apply_patch_call_output" and output is None:
        output = item.get("status") or ""
    return {"type": "function_call_output", "call_id": _call_id(item), "output": output}
