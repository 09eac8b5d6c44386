"""Gateway process: the options of an Anthropic /v1/messages body as the /v1 chat body's fields: tools and
tool_choice as OpenAI's, thinking as the template's enable_thinking (and budget_tokens as thinking_token_budget),
output_config's effort and format as reasoning_effort and response_format."""
from __future__ import annotations

from typing import Optional

from gateway.anthropic_tools import check_tool, definition
from gateway.errors import InvalidRequest, Unsupported

_TOOL_CHOICES = {"auto": "auto", "any": "required", "none": "none"}
_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}
_MIN_BUDGET = 1024
_BUDGET_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"


def tool_fields(body: dict) -> dict:
    """tools and tool_choice as OpenAI's (anthropic_tools: custom tools and Anthropic's client tools; its server
    tools, web search and the like, are not served here)."""
    out: dict = {}
    if body.get("mcp_servers"):
        # Anthropic's MCP connector: the API itself would connect to these servers and offer their tools.
        raise Unsupported("mcp_servers: the MCP connector is not supported (this server connects to no MCP server); "
                          "connect to it in your client and send its tools in `tools`", param="mcp_servers")
    tools = body.get("tools") or []
    for i, tool in enumerate(tools):
        check_tool(tool, i)
    if len({tool["name"] for tool in tools}) < len(tools):
        # Anthropic's own check (its 400 for Claude Code's duplicated MCP tools, claude-code#10687); OpenAI, vLLM
        # and Ollama serve a name offered twice.
        raise InvalidRequest("tools: Tool names must be unique.", param="tools")
    if tools:
        # strict (Anthropic's strict tool use: the input follows input_schema) is the OpenAI function's strict.
        out["tools"] = [{"type": "function", "function": {**definition(t),
                                                          **({"strict": True} if t.get("strict") is True else {})}}
                        for t in tools]
    choice = body.get("tool_choice")
    if choice is None or (choice["type"] == "auto" and not tools):
        return out
    if choice["type"] in ("any", "tool") and not tools:
        raise InvalidRequest(f"tool_choice: type '{choice['type']}' needs a non-empty tools list", param="tool_choice")
    if choice["type"] in ("any", "tool") and (body.get("thinking") or {}).get("type") in ("enabled", "adaptive"):
        # Anthropic (extended-thinking docs, "Tool choice limitation"): only auto and none go with thinking.
        raise InvalidRequest("Thinking may not be enabled when tool_choice forces tool use.", param="tool_choice")
    if choice["type"] == "tool":
        out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        out["tool_choice"] = _TOOL_CHOICES[choice["type"]]
    if choice.get("disable_parallel_tool_use"):
        out["parallel_tool_calls"] = False
    return out


def _budget(thinking: dict, max_tokens: Optional[int], interleaved: bool) -> int:
    """budget_tokens as Anthropic checks it: at least 1024, and below max_tokens (count_tokens has none) unless
    interleaved thinking (its beta header) lets the budget span the turn's thinking blocks."""
    budget = thinking["budget_tokens"]
    if budget < _MIN_BUDGET:
        raise InvalidRequest(f"thinking.enabled.budget_tokens: Input should be greater than or equal to {_MIN_BUDGET}",
                             param="thinking.budget_tokens")
    if max_tokens is not None and budget >= max_tokens and not interleaved:
        raise InvalidRequest(f"`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                             f"documentation at {_BUDGET_DOCS}", param="max_tokens")
    return budget


def reasoning_fields(body: dict, count: bool, interleaved: bool) -> dict:
    """thinking enabled (or adaptive) / disabled switches the model's thinking on / off; absent, the model's default
    (on), as vLLM and Ollama leave it; between_tools thinks only when the turn goes on after tool results. enabled's
    budget_tokens bounds the reasoning (vLLM's thinking_token_budget: then </think>). output_config.effort is the
    template's reasoning_effort (max = xhigh)."""
    out: dict = {}
    thinking = body.get("thinking")
    if thinking is not None:
        kind = thinking["type"]
        between = kind == "between_tools"
        out["enable_thinking"] = _after_tool_results(body["messages"]) if between else kind != "disabled"
        if thinking["type"] == "enabled":
            budget = _budget(thinking, None if count else body["max_tokens"], interleaved)
            out.update({} if count else {"thinking_token_budget": budget})
    config = body.get("output_config") or {}
    if config.get("effort") is not None:
        out["reasoning_effort"] = _EFFORTS[config["effort"]]
    form = _output_format(config.get("format"), body.get("output_format"))
    if form is not None:
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": form["schema"]}}
    return out


def _after_tool_results(messages: list) -> bool:
    """Whether the model answers tool results (the last message a user turn of tool_result blocks only): where
    between_tools thinking thinks, as Sonnet 5.5 does with it (no thinking before its first reply to the user, thinking
    between its tool calls; clients send it to switch thinking off where `disabled` is refused)."""
    content = messages[-1]["content"] if messages and messages[-1]["role"] == "user" else None
    return isinstance(content, list) and bool(content) and all(block.get("type") == "tool_result" for block in content)


def _output_format(current: Optional[dict], beta: Optional[dict]) -> Optional[dict]:
    """output_config.format, or output_format as the structured-outputs beta named it; 400 for two different ones."""
    if current is not None and beta is not None and current != beta:
        raise InvalidRequest("output_format and output_config.format differ: send one (output_format is the beta "
                             "name of output_config.format)", param="output_format")
    return current if current is not None else beta


class ThreadUnsupported(Unsupported):
    """400 thread_unsupported_request (anthropic-sdk-python src/anthropic/types/thread_unsupported_request_error.py):
    Anthropic's answer to a `thread` it cannot hold, whose `error.details.error_code` the SDK's threads read
    (lib/threads/_thread_state.py recovers_from): a tool runner then sends that turn and every later one with the
    whole conversation and no `thread`."""
    details = {"error_code": "thread_unsupported_request"}


def check_server_side(body: dict, count: bool) -> None:
    """Refuses what asks Anthropic's side for another answer than the next turn. A `thread` (the message-threads beta:
    {"type": "create"} asks the server to hold the conversation, {"type": "continue", "previous_message_id"} sends only
    the new turn): this server holds no conversation, and a continued thread's request is no whole conversation to
    answer. `compaction` (BetaCompactionConfigParam: the answer is the conversation's summary alone, a compaction
    block with stop_reason "compaction"), which count_tokens ignores, as Anthropic's does."""
    if body.get("thread") is not None:
        raise ThreadUnsupported("thread: Threads (server-held conversation state) are not supported by this server; "
                                "send the full conversation without `thread`", param="thread")
    if body.get("compaction") is not None and not count:
        raise Unsupported("compaction: server-side compaction (the conversation's summary as a compaction block) is "
                          "not supported by this server; summarize the conversation in your client, or send the "
                          "request without `compaction`", param="compaction")
