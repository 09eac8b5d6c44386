"""Gateway process: Anthropic content blocks read as chat text: text blocks, documents with a text source, search
results, and tool_result blocks (text, documents, search results and tool_reference blocks; images and PDFs as a line
saying they were left out) as the tool message answering a call; in assistant turns, the blocks of what ran on
Anthropic's side (server tools, the MCP connector) are left out and a compaction block reads as its summary."""
from __future__ import annotations

import json
from typing import Optional

from gateway.anthropic_tools import definition
from gateway.errors import InvalidRequest, Unsupported
from gateway.once_log import OnceLog

_TEXT_ONLY = "this model reads text only"
_SERVER_SIDE = OnceLog("/v1/messages: %s blocks in assistant turns are left out of the prompt: Anthropic's side ran "
                       "them (server tools, the MCP connector, a fallback to another model)")
# The blocks of an assistant turn that Anthropic's side ran: its server tools' calls and results (the advisor's too),
# the MCP connector's, and the fallback marker of a hop to another model, which Anthropic renders into no prompt
# (anthropic-sdk-python types/beta: BetaServerToolUseBlock, BetaAdvisorToolResultBlockParam,
# BetaMCPToolListingBlockParam, BetaFallbackBlockParam, ...).
SERVER_SIDE_KINDS = frozenset(("server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
                               "code_execution_tool_result", "bash_code_execution_tool_result",
                               "text_editor_code_execution_tool_result", "tool_search_tool_result",
                               "advisor_tool_result", "mcp_tool_use", "mcp_tool_result", "mcp_tool_listing",
                               "fallback", "compaction"))
_LEFT_OUT = OnceLog("/v1/messages: %s blocks in tool results are left out (a line in their place says so): the model "
                    "reads text only")


def refuse_block(kind: str, where: str) -> None:
    """Raises for a content block of `kind` this server does not take at `where`: Unsupported (400, text only) for image
    and document blocks, InvalidRequest for any other kind."""
    if kind in ("image", "document"):
        raise Unsupported(f"{where}: {kind} blocks are not supported: {_TEXT_ONLY}", param=where)
    raise InvalidRequest(f"{where}: content blocks of type '{kind}' are not supported here", param=where)


def server_side_text(block: dict, where: str) -> Optional[str]:
    """The text an assistant turn's block of Anthropic's side adds to the prompt: a compaction block's summary (of the
    turns it replaced; BetaCompactionBlock.content, null when compaction failed), else none. A conversation begun with
    Anthropic's API and carried on here replays them (a web search's server_tool_use and web_search_tool_result, its
    findings in the text after them); they were the 400 "content blocks of type 'server_tool_use' are not supported",
    on every later request (can1357/oh-my-pi#6496: a replayed web search 400s on a non-Anthropic endpoint). Left out,
    as Codex's history items of OpenAI's side are on /v1/responses."""
    if block["type"] != "compaction":
        _SERVER_SIDE.note([block["type"]])
        return None
    content = block.get("content")
    if content is not None and not isinstance(content, str):
        raise InvalidRequest(f"{where}.content must be a string or null", param=f"{where}.content")
    return content or None


def block_text(block: dict, where: str) -> str:
    """A text block's `text`; InvalidRequest naming `where`.text when it is missing or not a string."""
    if not isinstance(block.get("text"), str):
        raise InvalidRequest(f"{where}.text: Field required (a string)", param=f"{where}.text")
    return block["text"]


def document(block: dict, where: str) -> str:
    """A document block's text: a plain-text source's data, or a content source's text (a string or text blocks,
    joined by newlines), as Anthropic reads them; a PDF (base64, url or file source) is refused: text only here."""
    source = block.get("source") or {}
    kind = source.get("type")
    if kind == "text" and isinstance(source.get("data"), str):
        return source["data"]
    if kind == "content" and isinstance(source.get("content"), str):
        return source["content"]
    if kind == "content" and isinstance(source.get("content"), list):
        parts = source["content"]
        for j, part in enumerate(parts):
            if not isinstance(part, dict) or part.get("type") != "text":
                refuse_block(str(part.get("type") if isinstance(part, dict) else None), f"{where}.source.content.{j}")
        return "\n".join(block_text(part, f"{where}.source.content.{j}") for j, part in enumerate(parts))
    raise Unsupported(f"{where}: document blocks are not supported with a '{kind}' source: {_TEXT_ONLY} (send "
                      f"plain text as a 'text' or 'content' source)", param=f"{where}.source")


def search_result(block: dict, where: str) -> str:
    """A search_result block (Anthropic's RAG block: source, title, content of text blocks) as its title, source
    and texts, one a line; it is read the same in a user turn and in a tool_result."""
    for key in ("source", "title"):
        if not isinstance(block.get(key), str):
            raise InvalidRequest(f"{where}.{key}: Field required (a string)", param=f"{where}.{key}")
    content = block.get("content")
    if not isinstance(content, list):
        raise InvalidRequest(f"{where}.content: Field required (a list of text blocks)", param=f"{where}.content")
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text":
            refuse_block(str(part.get("type") if isinstance(part, dict) else None), f"{where}.content.{j}")
        texts.append(block_text(part, f"{where}.content.{j}"))
    return "\n".join([block["title"], block["source"], *texts])


def _tool_reference(block: dict, where: str, tools: dict) -> str:
    """A tool_reference block (a client-side tool search's answer: Claude Code's ToolSearch) as the definition of the
    tool it names, in the form the prompt's tool list gives it: Anthropic expands the reference into the tool's
    definition where it stands. Every tool is offered in the prompt here (defer_loading is not honoured), so the
    tool is callable either way; a name no tool of the request has is a 400."""
    name = block.get("tool_name")
    if not isinstance(name, str) or not name:
        raise InvalidRequest(f"{where}.tool_name: Field required (a string)", param=f"{where}.tool_name")
    tool = tools.get(name)
    if tool is None:
        raise InvalidRequest(f"{where}.tool_name: tool reference '{name}' names no tool in tools",
                             param=f"{where}.tool_name")
    return json.dumps({"type": "function", "function": definition(tool)}, ensure_ascii=False)


def _text_document(block: dict) -> bool:
    return block.get("type") == "document" and (block.get("source") or {}).get("type") in ("text", "content")


def _left_out(block: dict, kind: str) -> str:
    """A line in the image's or PDF's place in a tool result: a tool's output (Claude Code's Read of a picture, an MCP
    server's screenshot) is replayed in every later request of the session, so its 400 made each one fail
    (claude-code#91112 with Ollama's, lmstudio-ai/localization#425 with LM Studio's); llama.cpp's Anthropic route
    leaves such blocks out of a tool result too. The line tells the model what it did not get."""
    media = (block.get("source") or {}).get("media_type")
    _LEFT_OUT.note([kind])
    return f"[{kind}{f' ({media})' if isinstance(media, str) else ''} left out: {_TEXT_ONLY}]"


def tool_result(block: dict, where: str, tools: dict) -> dict:
    """A tool_result block as the tool message answering call `tool_use_id` (its blocks' texts joined by newlines;
    an image or a PDF as a line saying it was left out). tools: the request's tools by name, for tool_reference
    blocks."""
    if not isinstance(block.get("tool_use_id"), str) or not block["tool_use_id"]:
        raise InvalidRequest(f"{where}.tool_use_id: Field required", param=f"{where}.tool_use_id")
    content = block.get("content")
    if isinstance(content, list):
        texts = []
        for j, item in enumerate(content):
            kind, here = (item.get("type") if isinstance(item, dict) else None), f"{where}.content.{j}"
            if kind in ("image", "document") and not _text_document(item):
                texts.append(_left_out(item, kind))
            elif kind == "document":
                texts.append(document(item, here))
            elif kind == "search_result":
                texts.append(search_result(item, here))
            elif kind == "tool_reference":
                texts.append(_tool_reference(item, here, tools))
            elif kind == "text":
                texts.append(block_text(item, here))
            else:
                refuse_block(str(kind), here)
        content = "\n".join(texts)
    elif content is not None and not isinstance(content, str):
        raise InvalidRequest(f"{where}.content: must be a string or a list of text blocks", param=f"{where}.content")
    return {"role": "tool", "tool_call_id": block["tool_use_id"], "content": content or ""}
