"""Gateway process: Anthropic /v1/messages bodies -> the /v1 chat body -> the same validated Plan (one generation path).

As vLLM's and Ollama's Anthropic layers do, the request becomes a chat request: `system` and any system-role messages
in `messages` the one system message, content blocks the chat parts (tool_use an assistant tool call, tool_result a
tool message, thinking the reasoning of an earlier turn), `tools` / `tool_choice` OpenAI's, `thinking` the template's
enable_thinking. A final assistant message with text, or thinking alone, is continued (Anthropic's prefill). Images and
documents are refused: this model reads text only.
"""
from __future__ import annotations

import re
import secrets
from typing import Any

from gateway.anthropic_blocks import (SERVER_SIDE_KINDS, block_text, document, refuse_block, search_result,
                                      server_side_text, tool_result)
from gateway.anthropic_options import check_server_side, reasoning_fields, tool_fields
from gateway.responses_reasoning import decode_reasoning
from gateway.anthropic_schema import COUNT_SCHEMA, MESSAGES_SCHEMA, check_sizes, validate
from gateway.errors import ApiError, InvalidRequest, count_past_context, renamed
from gateway.model import ModelCard
from gateway.openai import parse_chat
from gateway.openai_plan import Plan
from gateway.tools import dump_arguments

# Claude Code >= 2.1.154 also sends turns with the roles ctx and msg (vllm#44000): user turns, as vLLM reads them.
_ROLE_ALIASES = {"ctx": "user", "msg": "user"}
# Claude Code's first system block: "x-anthropic-billing-header: cc_version=2.1.x.abc; cc_entrypoint=cli; cch=1a2b3;".
_BILLING_LINE = re.compile(r"^x-anthropic-billing-header:[^\n]*\n?")
# The chat route's field names in its errors -> this API's, most specific first. A chat message's index is not the
# Anthropic message's (the system prompt and each tool_result are chat messages too), so only "messages" is named.
_RENAMES = [(re.compile(r"\btools\[(\d+)\]\.function\.parameters\b"), r"tools.\1.input_schema"),
            (re.compile(r"\btools\[(\d+)\](\.function)?"), r"tools.\1"),
            (re.compile(r"\bmessages\[\d+\](\.[\w.\[\]]*)?"), "messages"),
            (re.compile(r"\bresponse_format\.json_schema\.schema\b"), "output_config.format.schema"),
            (re.compile(r"\bresponse_format(\.json_schema)?\b"), "output_config.format"),
            (re.compile(r"\breasoning_effort\b"), "output_config.effort"),
            (re.compile(r"\bthinking_token_budget\b"), "thinking.budget_tokens")]


def _system_text(system: Any, where: str) -> str:
    """A system prompt's text: a string, or its text blocks joined (as vLLM and Ollama join them), without Claude
    Code's billing line: its cch= nonce changes with every request and, first in the prompt, would defeat the
    prefix cache for the whole conversation (vLLM drops it too)."""
    if not isinstance(system, list):
        return _BILLING_LINE.sub("", system or "")
    parts = []
    for i, block in enumerate(system):
        if block["type"] != "text":
            refuse_block(block["type"], f"{where}.{i}")
        parts.append(_BILLING_LINE.sub("", block_text(block, f"{where}.{i}")))
    return "".join(parts)


def _system(system: Any, inline: list) -> list:
    """The one leading system message: the top-level system, then the system-role messages of `messages` (Claude
    Code since 2.1.154 sends some there, which Anthropic accepts); none when all are empty. They are merged, as
    vLLM merges them, because chat templates take a system message only at the start."""
    text = "\n\n".join(part for part in [_system_text(system, "system"), *inline] if part)
    return [{"role": "system", "content": text}] if text else []


def _tool_call(block: dict, where: str) -> dict:
    """A tool_use block as an OpenAI tool call (input as its JSON arguments)."""
    for key in ("id", "name"):
        if not isinstance(block.get(key), str) or not block[key]:
            raise InvalidRequest(f"{where}.{key}: Field required", param=f"{where}.{key}")
    # A null input is none, as vLLM reads it (AnthropicContentBlock.input: dict | None; block.input or {}).
    arguments = {} if block.get("input") is None else block["input"]
    if not isinstance(arguments, dict):
        raise InvalidRequest(f"{where}.input: must be an object", param=f"{where}.input")
    return {"id": block["id"], "type": "function",
            "function": {"name": block["name"], "arguments": dump_arguments(arguments)}}


def _content_text(parts: list) -> Any:
    """One text part as a string (as vLLM passes it), several as OpenAI text parts, none as None."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else [{"type": "text", "text": text} for text in parts]


def _user(content: list, where: str, tools: dict) -> list:
    """A user turn: its tool_result blocks as tool messages (first: Anthropic puts them first), then its text.
    tools: the request's tools by name (a tool_result's tool_reference blocks name them)."""
    results, texts = [], []
    for j, block in enumerate(content):
        kind, here = block["type"], f"{where}.content.{j}"
        if kind == "tool_result":
            results.append(tool_result(block, here, tools))
        elif kind == "text":
            texts += [block_text(block, here)] if block.get("text") != "" else []
        elif kind == "document":
            texts.append(document(block, here))
        elif kind == "search_result":
            texts.append(search_result(block, here))
        else:
            refuse_block(kind, here)
    text = _content_text(texts)
    return results + ([{"role": "user", "content": text}] if text is not None else [])


def _assistant(content: list, where: str) -> list:
    """An assistant turn: text, tool calls, and the thinking of that turn (redacted thinking is opaque: dropped; what
    Anthropic's side ran is left out, a compaction is its summary: anthropic_blocks.server_side_text)."""
    texts, calls, thinking = [], [], []
    for j, block in enumerate(content):
        kind, here = block["type"], f"{where}.content.{j}"
        if kind == "text":
            texts += [block_text(block, here)] if block.get("text") != "" else []
        elif kind == "tool_use":
            calls.append(_tool_call(block, here))
        elif kind == "thinking":
            if not isinstance(block.get("thinking"), str):
                raise InvalidRequest(f"{here}.thinking: Field required (a string)", param=f"{here}.thinking")
            # display "omitted" sent it back as "" and its signature, which carries it (thinking_signature).
            thinking.append(block["thinking"] or decode_reasoning(block.get("signature"), here, "signature") or "")
        elif kind in SERVER_SIDE_KINDS:
            summary = server_side_text(block, here)
            texts += [summary] if summary else []
        elif kind != "redacted_thinking":
            refuse_block(kind, here)
    message = {"role": "assistant", "content": _content_text(texts)}
    if calls:
        message["tool_calls"] = calls
    if any(thinking):
        message["reasoning_content"] = "".join(thinking)
    return [message] if (texts or calls or any(thinking)) else []


def _blocks(message: dict) -> list:
    return message["content"] if isinstance(message["content"], list) else []


def _check_tool_results(messages: list) -> None:
    """400 for a tool_result answering no tool_use of the turn before it (system-role messages aside), in Anthropic's
    words: the template would render a tool response to a call the conversation never made."""
    called: set = set()
    for i, message in enumerate(messages):
        if message["role"] == "system":
            continue
        for j, block in enumerate(_blocks(message)):
            tool_use_id = block.get("tool_use_id")
            if block["type"] == "tool_result" and isinstance(tool_use_id, str) and tool_use_id not in called:
                raise InvalidRequest(f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                                     f"blocks: {tool_use_id}. Each `tool_result` block must have a corresponding "
                                     f"`tool_use` block in the previous message.", param=f"messages.{i}.content.{j}")
        called = {block.get("id") for block in _blocks(message) if block["type"] == "tool_use"}


def _messages(messages: list, tools: dict) -> tuple[list, bool, list]:
    """(chat messages, whether the last one is an assistant prefill to continue, the system-role messages' texts)."""
    out, inline = [], []
    messages = [{**message, "role": _ROLE_ALIASES.get(message["role"], message["role"])} for message in messages]
    final_index = max((i for i, message in enumerate(messages) if message["role"] != "system"), default=-1)
    for i, message in enumerate(messages):
        content, last = message["content"], i == final_index
        if message["role"] == "system":
            inline.append(_system_text(content, f"messages.{i}.content"))
            continue
        # Empty text blocks are skipped (as vLLM does). A turn left with nothing (Claude Code has sent them, and
        # replays them with every later request) is an empty turn of its role, as vLLM renders content "", not
        # Anthropic's 400; an empty final assistant turn is no prefill (the generation prompt follows).
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        where = f"messages.{i}"
        turn = _user(content, where, tools) if message["role"] == "user" else _assistant(content, where)
        if not turn and not (last and message["role"] == "assistant"):
            turn = [{"role": message["role"], "content": ""}]
        out += turn
    _check_tool_results(messages)
    final = out[-1] if out else None
    # A final assistant turn with text, or with thinking alone (continued after it), is a prefill.
    prefill = bool(final and messages[final_index]["role"] == "assistant" and final["role"] == "assistant"
                   and (final["content"] or final.get("reasoning_content")) and not final.get("tool_calls"))
    if prefill and final["content"] is None:
        final["content"] = ""
    if prefill and final["content"] and _ends_in_space(final["content"]):
        # Anthropic's rule; the template trims the turn, so the text to continue would not be the prompt's end.
        raise InvalidRequest("messages: final assistant content cannot end with trailing whitespace",
                             param=f"messages.{final_index}.content")
    if not out:
        raise InvalidRequest("messages: at least one user or assistant message is required", param="messages")
    return out, prefill, inline


def _ends_in_space(content) -> bool:
    text = content if isinstance(content, str) else content[-1]["text"]
    return text != text.rstrip()


def _stop_sequences(stops: list) -> list:
    """An empty stop sequence is Anthropic's 400 (vLLM's SamplingParams refuses one too), never silently dropped."""
    if "" in stops:
        raise InvalidRequest("stop_sequences: each stop sequence must be non-empty", param="stop_sequences")
    return stops


def to_chat_body(body: Any, ctx: int, count: bool = False, interleaved: bool = False) -> dict:
    """The /v1 chat body a Messages (count: count_tokens) body asks for; 400 for what Anthropic would refuse.
    interleaved: the request's anthropic-beta header names interleaved thinking."""
    check_sizes(body, ctx)
    body = validate(body, COUNT_SCHEMA if count else MESSAGES_SCHEMA)
    check_server_side(body, count)
    # The tools are checked before the messages, whose tool_reference blocks read a named tool's input_schema.
    tools = tool_fields(body)
    messages, prefill, inline = _messages(body["messages"], {tool["name"]: tool for tool in body.get("tools") or []})
    chat = {"model": body["model"], "messages": _system(body.get("system"), inline) + messages, **tools,
            **reasoning_fields(body, count, interleaved)}
    if body.get("chat_template_kwargs") is not None:
        # vLLM's Anthropic routes pass them to the template; an explicit `thinking` still wins (enable_thinking).
        chat["chat_template_kwargs"] = body["chat_template_kwargs"]
    if prefill:
        chat["continue_final_message"] = True
    if not count:
        chat.update(max_tokens=body["max_tokens"], stream=bool(body.get("stream")),
                    stop=_stop_sequences(body.get("stop_sequences") or []), temperature=body.get("temperature"),
                    top_p=body.get("top_p"), top_k=body.get("top_k"))
    return chat


def _parse_chat(chat: dict, card: ModelCard, served_name: str) -> Plan:
    """The chat route's Plan; its errors name this API's fields (tools.0.input_schema, not tools[0].function...)."""
    try:
        return parse_chat(chat, card, served_name)
    except ApiError as exc:
        raise renamed(exc, _RENAMES) from None


def parse_messages(body: Any, card: ModelCard, served_name: str, interleaved: bool = False) -> Plan:
    """Validates a /v1/messages body and renders + tokenizes its prompt (CPU work: run it off the loop)."""
    chat = to_chat_body(body, card.max_context_len, interleaved=interleaved)
    plan = _parse_chat(chat, card, served_name)
    plan.gen.req_id = f"msg_{secrets.token_hex(12)}"
    return plan


def count_tokens(body: Any, card: ModelCard, served_name: str) -> int:
    """The input tokens /v1/messages would count for this body's prompt (the same rendering, to the token).

    A tokenized prompt past the context is counted, as Anthropic counts it: clients ask precisely to learn that it
    no longer fits. One refused for its size before tokenizing (a lower bound only) stays a 400, which spares the
    gateway tokenizing up to 32 MiB of text for a count that can only say "too long"."""
    chat = to_chat_body(body, card.max_context_len, count=True)
    return count_past_context(lambda: _parse_chat(chat, card, served_name).gen.prompt_ids)
