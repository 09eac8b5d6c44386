"""Gateway process: a /v1/responses `input` (a string or a list of items) -> the chat route's messages.

Messages keep their role, except that instructions and every system / developer item are one leading system message
(the Qwen3.5 / 3.8 templates take no other); function_call items become the assistant's tool_calls
(consecutive calls share one assistant message, as the model wrote them; a custom_tool_call's input is its one
argument), function_call_output and custom_tool_call_output items become tool messages, and a reasoning item becomes
the reasoning_content of the assistant turn that follows it (a turn of its own when a user message, or the end of the
input, comes first); Codex's agent_message items are user turns, its agent_reasoning items are left out, and so are
the items only OpenAI's side can act on (a hosted tool's call, a remote MCP server's items, a compaction); a
local_shell_call, shell_call or apply_patch_call is a call of `local_shell`, `shell` or `apply_patch`
(gateway.responses_client_calls). An item_reference that gateway.responses_items did not resolve is a 400, and this
text-only model takes no image, file or audio part (in a call's output such a part is a line saying it was left out).
"""
from __future__ import annotations

import json
from typing import Any, Optional

from gateway.chat_prompt import one_system_message
from gateway.errors import InvalidRequest, Unsupported
from gateway.once_log import OnceLog
from gateway.responses_client_calls import CALLS, OUTPUTS, as_function_call, as_function_call_output
from gateway.responses_reasoning import decode_reasoning
from gateway.responses_tools import call_name

_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text", "text")
_MEDIA_PARTS = ("input_image", "input_file", "input_audio")
_left_out = OnceLog("/v1/responses: %s parts of call outputs are left out (a line in their place says so): the model "
                    "reads text only")
_agent_reasoning_left_out = OnceLog("/v1/responses: %s items (Codex's multi-agent reasoning) are left out of the "
                                    "prompt")
_openai_side = OnceLog("/v1/responses: %s items are left out of the prompt: they ran on OpenAI's side (hosted tools) "
                       "or only OpenAI can read them (compaction), as Codex leaves them out for a Chat Completions "
                       "provider")
NOT_STORED = ("this server keeps no stored prompt or vLLM state (only its recent responses and conversations, in the "
              "memory of the gateway that answered them)")


class _Conversation:
    """The chat messages built so far, the reasoning waiting for its assistant turn, and the call ids seen."""

    def __init__(self):
        self.messages: list = []
        self.reasoning: Optional[str] = None
        self.call_ids: set = set()

    def assistant(self, content: Optional[str]) -> dict:
        """A new assistant message, carrying the reasoning item that came before it."""
        message = {"role": "assistant", "content": content}
        if self.reasoning is not None:
            message["reasoning_content"], self.reasoning = self.reasoning, None
        self.messages.append(message)
        return message

    def close_reasoning(self) -> None:
        """A reasoning item no assistant output followed (its turn was cut, or produced nothing else) is a turn of its
        own, where it stands: it is not the reasoning of the next user turn's answer."""
        if self.reasoning is not None:
            self.assistant("")


def _string(item: dict, key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise InvalidRequest(f"{where}.{key} must be a string", param=f"{where}.{key}")
    return value


def _part_text(part: Any, where: str) -> str:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in _MEDIA_PARTS:
        raise Unsupported(f"{where} is an {kind}: this model reads text only (input_text parts)",
                          param=f"{where}.type")
    if kind == "refusal":
        return _string(part, "refusal", where)
    if kind not in _TEXT_PARTS:
        raise InvalidRequest(f"{where}.type must be one of {', '.join(_TEXT_PARTS)}, got {kind!r}",
                             param=f"{where}.type")
    return _string(part, "text", where)


def content_text(content: Any, where: str) -> str:
    """The text of a message's content or a call's output: a string, or the text parts of a list, joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequest(f"{where} must be a string or a list of content parts", param=where)
    return "".join(_part_text(part, f"{where}[{j}]") for j, part in enumerate(content))


def _message(item: dict, where: str, convo: _Conversation) -> None:
    role = item.get("role")
    if role not in _ROLES:
        raise InvalidRequest(f"{where}.role must be one of {', '.join(_ROLES)}, got {role!r}", param=f"{where}.role")
    text = content_text(item.get("content"), f"{where}.content")
    if role == "assistant":
        convo.assistant(text)
    else:
        convo.close_reasoning()
        convo.messages.append({"role": role, "content": text})


def _function_call(item: dict, where: str, convo: _Conversation) -> None:
    call_id = _string(item, "call_id", where)
    _string(item, "name", where)
    if item.get("type") == "custom_tool_call":
        # A custom tool's call, its input the one string parameter the tool is offered with (responses_tools).
        arguments = json.dumps({"input": _string(item, "input", where)}, ensure_ascii=False)
    else:
        arguments = item.get("arguments", "")
    if not isinstance(arguments, str):
        raise InvalidRequest(f"{where}.arguments must be a JSON string", param=f"{where}.arguments")
    last = convo.messages[-1] if convo.messages else None
    # The model's text and its calls are one assistant turn: a call joins the assistant message just before it.
    if last is None or last["role"] != "assistant" or convo.reasoning is not None:
        last = convo.assistant(None)
    call = {"id": call_id, "type": "function", "function": {"name": call_name(item), "arguments": arguments}}
    last.setdefault("tool_calls", []).append(call)
    convo.call_ids.add(call_id)


def _function_call_output(item: dict, where: str, convo: _Conversation) -> None:
    call_id = _string(item, "call_id", where)
    if call_id not in convo.call_ids:
        raise InvalidRequest(f"No tool call found for function call output with call_id {call_id}: nothing is "
                             f"stored here, so send the function_call item before its output", param=f"{where}.call_id")
    output = _output_text(item.get("output"), f"{where}.output")
    convo.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})


def _output_text(output: Any, where: str) -> str:
    """A call output's text, an image or file part in it a line saying it was left out: a tool's output (Codex's
    view_image, an MCP screenshot) is replayed in every later request, so its 400 failed each one (llama.cpp's
    "Output of tool call should be 'Input text'", ggml-org/llama.cpp#23890); the model learns what it did not get.
    In a message, such a part stays the 400."""
    if not isinstance(output, list):
        return content_text(output, where)
    text = ""
    for j, part in enumerate(output):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _MEDIA_PARTS:
            text += _part_text(part, f"{where}[{j}]")
            continue
        _left_out.note([kind])
        # The line stands alone: the text parts around it are joined as they are.
        text += ("\n" if text and not text.endswith("\n") else "") + f"[{kind} left out: this model reads text only]"
        text += "\n" if j < len(output) - 1 else ""
    return text


def _reasoning(item: dict, where: str, convo: _Conversation) -> None:
    """The reasoning text as this server returns it (content, or encrypted_content for a client that leaves the text
    out) or as OpenAI does (summary)."""
    kept = None if item.get("content") else decode_reasoning(item.get("encrypted_content"), where)
    if kept is not None:
        convo.reasoning = kept
        return
    parts = item.get("content") or item.get("summary") or []
    if not isinstance(parts, list):
        raise InvalidRequest(f"{where}.content must be a list of reasoning_text parts", param=f"{where}.content")
    texts = [part.get("text") for part in parts if isinstance(part, dict)]
    if not all(isinstance(text, str) for text in texts):
        raise InvalidRequest(f"{where}: each reasoning part needs a string text", param=f"{where}.content")
    convo.reasoning = "\n".join(texts)


def _agent_message(item: dict, where: str, convo: _Conversation) -> None:
    """Codex's multi-agent item (the task handed to a spawned sub-agent, a sub-agent's report), which Codex replays in
    every later request of that thread: a user turn of its text, as Ollama and NVIDIA Dynamo read it. Codex carries
    the task's payload in an encrypted_content part after the input_text envelope ("... Payload:"), in plaintext for
    a provider that cannot decrypt it: its text, in order, one part a line (as Dynamo joins them)."""
    content = item.get("content")
    if not isinstance(content, list):
        text = "" if content is None else content_text(content, f"{where}.content")
    else:
        text = "\n".join(_agent_part_text(part, f"{where}.content[{j}]") for j, part in enumerate(content))
    convo.close_reasoning()
    convo.messages.append({"role": "user", "content": text})


def _agent_part_text(part: Any, where: str) -> str:
    if isinstance(part, dict) and part.get("type") == "encrypted_content":
        return _string(part, "encrypted_content", where)
    return _part_text(part, where)


def _agent_reasoning(item: dict, where: str, convo: _Conversation) -> None:
    """Codex's multi-agent reasoning item (another agent's thinking, its encrypted_content opaque), which Codex replays
    with agent_message items in every later request of the thread (envoyproxy/ai-gateway#2442): left out of the
    prompt, as a template leaves out the thinking of earlier turns; its 400 ended the thread."""
    _agent_reasoning_left_out.note(["agent_reasoning"])


def _openai_side_item(item: dict, where: str, convo: _Conversation) -> None:
    """An item only OpenAI's side can act on, which a client replays when it resumes or hands off a thread begun there
    (openai/codex#45401: a compacted Codex session resumed with another Responses provider failed every request): a
    hosted tool's call (web search, file search, code interpreter, image generation, a remote MCP server's call; its
    findings are in the assistant's text after it), a remote MCP server's tool listing and approval request / response
    (OpenAI's McpListTools, McpApprovalRequest, McpApprovalResponse input items), a tool search (Codex's deferred
    tools), a compaction (OpenAI's encrypted summary of the turns it replaced), a compaction_trigger (asking OpenAI
    to write one), and programmatic tool calling's program and program_output (the JavaScript OpenAI ran, whose
    function calls, client-run, stay). Left out of the prompt, as Codex's own Chat Completions request leaves them out
    (codex-rs chat wire: ResponseItem::WebSearchCall, Compaction, ToolSearchCall ... => {}), and as the `mcp` tool
    itself is."""
    _openai_side.note([item["type"]])


def _client_call(item: dict, where: str, convo: _Conversation) -> None:
    """A call of a tool OpenAI defines and the client runs (local_shell, shell, apply_patch): a function call."""
    _function_call(as_function_call(item, where), where, convo)


def _client_call_output(item: dict, where: str, convo: _Conversation) -> None:
    """Its output, which follows its call as a function's does."""
    _function_call_output(as_function_call_output(item, where), where, convo)


def _item_reference(item: dict, where: str, convo: _Conversation) -> None:
    """A reference left unresolved (gateway.responses_items resolves those to items this gateway keeps)."""
    raise InvalidRequest(f"{where} is an item_reference to {item.get('id')!r}, an item this server does not hold: it "
                         f"keeps only the output items of recent responses created without store: false, in the "
                         f"memory of the gateway that answered them; send the items themselves", param=f"{where}.id")


_ITEMS = {"message": _message, "function_call": _function_call, "function_call_output": _function_call_output,
          "custom_tool_call": _function_call, "custom_tool_call_output": _function_call_output,
          "reasoning": _reasoning, "agent_message": _agent_message, "item_reference": _item_reference,
          "agent_reasoning": _agent_reasoning, **dict.fromkeys(CALLS, _client_call),
          **dict.fromkeys(OUTPUTS, _client_call_output),
          **dict.fromkeys(("web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
                           "tool_search_call", "tool_search_output", "compaction", "compaction_trigger", "mcp_call",
                           "mcp_list_tools", "mcp_approval_request", "mcp_approval_response", "program",
                           "program_output"), _openai_side_item),
          # Its tools are offered with the top-level ones (responses_tools.placed_tools); it adds no turn.
          "additional_tools": lambda item, where, convo: None}


def continues_final_message(value: Any) -> bool:
    """vLLM's partial message completion: a final assistant message item whose status is in_progress or incomplete (an
    answer cut short, or a prefill) is continued, not answered with a new turn (vllm's responses/utils.py
    should_continue_final_message; a completed one, or none, opens a new turn)."""
    last = value[-1] if isinstance(value, list) and value and isinstance(value[-1], dict) else {}
    return (last.get("type", "message") == "message" and last.get("role") == "assistant"
            and last.get("status") in ("in_progress", "incomplete"))


def input_messages(value: Any, instructions: Optional[str]) -> list:
    """The chat messages for `instructions` (a system message first) and `input`."""
    convo = _Conversation()
    if instructions:
        convo.messages.append({"role": "system", "content": instructions})
    if isinstance(value, str):
        convo.messages.append({"role": "user", "content": value})
    for i, item in enumerate(value if isinstance(value, list) else []):
        # A bare {"role", "content"} is a message (EasyInputMessage).
        kind = item.get("type")
        if kind is None and "role" in item:
            kind = "message"
        handler = _ITEMS.get(kind)
        if handler is None:
            raise Unsupported(f"input[{i}]: items of type {kind!r} are not supported (message, function_call, "
                              f"function_call_output, custom_tool_call, custom_tool_call_output, reasoning, "
                              f"agent_message, agent_reasoning, additional_tools, local_shell_call, shell_call, "
                              f"apply_patch_call and their outputs are; OpenAI's hosted tools' calls and compaction "
                              f"are left out)",
                              param=f"input[{i}].type")
        handler(item, f"input[{i}]", convo)
    convo.close_reasoning()
    if not convo.messages:
        raise InvalidRequest("input must not be empty (or send instructions)", param="input")
    return one_system_message(convo.messages)
