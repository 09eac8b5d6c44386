"""Gateway process: what the chat template can render, probed as llama.cpp's server reports it in /props
chat_template_caps (common/jinja/caps.cpp caps_get: small conversations rendered while the values they hold are
watched for being read)."""
from __future__ import annotations

import functools
from typing import Any

import jinja2

from gateway.chat import compile_template

_REASONING_MARK = "<REASONING_CONTENT_PLACEHOLDER>"
_TOOLS = [{"name": "tool", "type": "function", "function": {
    "name": "tool1", "description": "Tool description",
    "parameters": {"type": "object", "properties": {"arg": {"type": "string", "description": "Arg description"}},
                   "required": ["arg"]}}}]


class _Watched(dict):
    """A mapping that notes which of its keys the template read (llama.cpp's value stats `used`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read: set = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def items(self):
        self.read.update(self.keys())
        return super().items()

    def values(self):
        self.read.update(self.keys())
        return super().values()


class _Content(str):
    """A string content that notes being iterated or indexed (llama.cpp's array_access: a template for typed parts).
    The note is this string's own: /props probes in a worker thread (run_cpu), so a class-wide flag could be another
    probe's."""
    as_parts = False

    def __iter__(self):
        self.as_parts = True
        return super().__iter__()

    def __getitem__(self, key):
        self.as_parts = True
        return super().__getitem__(key)


def _watch(value: Any) -> Any:
    if isinstance(value, dict):
        return _Watched({key: _watch(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_watch(item) for item in value]
    return value


def _render(template: jinja2.Template, messages: list, tools: list, **kwargs) -> tuple[bool, str]:
    try:
        return True, template.render(messages=messages, tools=tools, add_generation_prompt=True,
                                     bos_token="", eos_token="", **kwargs)
    except Exception:   # noqa: BLE001 - a probe the template refuses says only that it cannot take that shape
        return False, ""


def _call(call_id: str, arguments: Any) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "tool1", "arguments": arguments}}


def _tool_turns(calls: list) -> list:
    return _watch([{"role": "user", "content": "User message"},
                   {"role": "assistant", "content": "", "tool_calls": calls},
                   {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
                   {"role": "assistant", "content": "The tool response was 'tool response'"},
                   {"role": "user", "content": "User message"}])


def _content_caps(template: jinja2.Template) -> dict:
    content = _Content("content")
    ok, _ = _render(template, [{"role": "user", "content": content}], [])
    system = _watch([{"role": "system", "content": "System message"}, {"role": "user", "content": "User message"}])
    _render(template, system, [])
    return {"supports_string_content": ok, "supports_typed_content": content.as_parts,
            "supports_system_role": "content" in system[0].read}


def _tool_caps(template: jinja2.Template) -> dict:
    caps = {"supports_tools": True, "supports_tool_calls": True, "supports_object_arguments": False}
    for arguments in ({"arg": "value"}, '{"arg": "value"}'):
        messages, tools = _tool_turns([_call("call00001", arguments)]), _watch(_TOOLS)
        ok, text = _render(template, messages, tools)
        if not ok:
            continue
        caps["supports_tools"] = "name" in tools[0]["function"].read or "tool1" in text
        caps["supports_tool_calls"] = "tool_calls" in messages[1].read
        caps["supports_object_arguments"] = isinstance(arguments, dict) and caps["supports_tool_calls"] and \
            "arg" in messages[1]["tool_calls"][0]["function"]["arguments"].read
        return caps
    return {**caps, "supports_tools": False, "supports_tool_calls": False}


def _parallel_calls(template: jinja2.Template, object_arguments: bool) -> bool:
    arguments = {"arg": "value"} if object_arguments else '{"arg": "value"}'
    messages = _tool_turns([_call("call00001", arguments), _call("call00002", arguments)])
    ok, _ = _render(template, messages, _watch(_TOOLS))
    return ok and "function" in messages[1]["tool_calls"][1].read


def _preserves_reasoning(template: jinja2.Template) -> bool:
    # Read from the output, as llama.cpp does: a template may test reasoning_content and still drop it.
    turns = [{"role": "user", "content": "User message"},
             {"role": "assistant", "content": "Assistant message", "reasoning_content": _REASONING_MARK},
             {"role": "user", "content": "User message"},
             {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning content"},
             {"role": "user", "content": "User message"}]
    _, text = _render(template, turns, [], preserve_thinking=True, clear_thinking=False,
                      truncate_history_thinking=False)
    return _REASONING_MARK in text


@functools.lru_cache(maxsize=4)
def template_caps(source: str) -> dict:
    """llama.cpp's chat_template_caps of a chat template: which message shapes it renders (tools, tool calls, parallel
    calls, object arguments, a system role, string or typed content, earlier turns' reasoning kept)."""
    if not source:
        return {}
    template = compile_template(source)
    caps = {**_content_caps(template), **_tool_caps(template)}
    caps["supports_parallel_tool_calls"] = caps["supports_tool_calls"] and \
        _parallel_calls(template, caps["supports_object_arguments"])
    caps["supports_preserve_reasoning"] = _preserves_reasoning(template)
    return dict(sorted(caps.items()))
