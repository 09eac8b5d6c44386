"""Gateway process: JSON schemas of Anthropic's /v1/messages and /v1/messages/count_tokens bodies; a violation is a
400 whose message names the field as Anthropic does ("max_tokens: Field required", "messages.0.role: ...")."""
from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from gateway.errors import ContextLengthExceeded, InvalidRequest
from gateway.list_limits import MAX_STOPS
from gateway.once_log import OnceLog
from gateway.schema_errors import error_message
from gateway.schema_validate import integral

_INT32_MAX = (1 << 31) - 1

# Block types are checked one by one in anthropic_request (image and document get their own 400 there). Each field a
# block may carry has the type vLLM's AnthropicContentBlock gives it (entrypoints/anthropic/protocol.py), so a wrong
# one is a 400 naming it, never ignored (a "signature": 5 or an "is_error": "yes" was).
_STR = {"type": ["string", "null"]}


def _when(kinds: tuple, **fields) -> dict:
    """The types of some block fields for the block types in kinds."""
    return {"if": {"properties": {"type": {"enum": list(kinds)}}}, "then": {"properties": fields}}


_BLOCK = {"type": "object", "required": ["type"], "properties": {
    "type": {"type": "string"}, **dict.fromkeys(("text", "thinking", "signature", "data", "id", "name", "tool_use_id",
                                                 "title", "context", "tool_name"), _STR),
    "input": {"type": ["object", "null"]}, "is_error": {"type": ["boolean", "null"]},
    # A string or blocks (tool_result's object content is its 400: anthropic_blocks); a server tool's result, left out
    # (anthropic_blocks.server_side_text), may hold an object: a fetched page, an execution's result, an error.
    "cache_control": {"type": ["object", "null"]}, "content": {"type": ["string", "array", "object", "null"]}},
    # citations and source by block type, as Anthropic types them: a text block's citations are a list (an earlier
    # answer's), a document's and a search result's are {"enabled": bool}; a search result's source is its URL.
    # Looked at only in a block that carries the field: the if/then per block made a list of plain text blocks four
    # times as slow to validate (250 000 blocks took 70 s to answer).
    "dependentSchemas": {
        "citations": {"allOf": [_when(("search_result", "document"), citations={"type": ["object", "null"]}),
                                _when(("text",), citations={"type": ["array", "null"]})]},
        "source": {"allOf": [_when(("search_result",), source={"type": "string"}),
                             _when(("document", "image"), source={"type": ["object", "null"]})]}}}
# A string or a list of blocks, without anyOf: an error names the field ("...text: 5 is not of type 'string'"), not
# the whole content ("... is not valid under any of the given schemas").
_CONTENT = {"type": ["string", "array"], "items": _BLOCK}

_MESSAGE = {
    "type": "object",
    "required": ["role", "content"],
    # ctx and msg: Claude Code's (>= 2.1.154) names for user turns (anthropic_request reads them so).
    "properties": {"role": {"enum": ["user", "assistant", "system", "ctx", "msg"]}, "content": _CONTENT},
}

_TOOL = {
    "type": "object",
    # The MCP connector's toolset names its server, not a tool (the SDKs' BetaMCPToolsetParam: type "mcp_toolset",
    # mcp_server_name): it reaches anthropic_tools.check_tool's 400 for tools run on Anthropic's side.
    "if": {"required": ["type"], "properties": {"type": {"const": "mcp_toolset"}}},
    "else": {"required": ["name"]},
    "properties": {
        "type": {"type": ["string", "null"]},
        "name": {"type": "string", "minLength": 1},  # what the call markup can carry: anthropic_request
        "description": {"type": ["string", "null"]},
        # Without "type" it is an object schema (anthropic_options.input_schema), as vLLM and Ollama read it.
        "input_schema": {"type": "object", "properties": {"type": {"const": "object"}}},
    },
}

_TOOL_CHOICE = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"enum": ["auto", "any", "tool", "none"]},
        "name": {"type": "string"},
        "disable_parallel_tool_use": {"type": "boolean"},
    },
    "if": {"properties": {"type": {"const": "tool"}}},
    "then": {"required": ["name"]},
}

# budget_tokens bounds "enabled" thinking only (at least 1024: anthropic_options); with "adaptive" it is typed and
# ignored, as Anthropic ignores it: Claude Code (>= 2.1.252) sends {"type": "adaptive", "budget_tokens": 0}.
# "between_tools" (the SDKs' ThinkingConfigBetweenTools): thinking only after tool results (anthropic_options).
# display "updates" (the SDKs' BetaThinkingConfigAdaptiveParam / ...EnabledParam, which Claude Code >= 2.1.3xx sends
# with adaptive thinking) shows the thinking as "summarized" does: the whole thinking is what this server has to show.
_THINKING = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"enum": ["enabled", "disabled", "adaptive", "between_tools"]},
        "budget_tokens": {"type": "integer", "minimum": 0, "maximum": _INT32_MAX},
        "display": {"enum": ["summarized", "omitted", "updates"]},
    },
    "if": {"properties": {"type": {"const": "enabled"}}},
    "then": {"required": ["budget_tokens"], "properties": {"budget_tokens": {"minimum": 1}}},
}

_FORMAT = {"type": "object", "required": ["type", "schema"],
           "properties": {"type": {"const": "json_schema"}, "schema": {"type": "object"}}}
_OUTPUT_CONFIG = {
    "type": "object",
    "properties": {"effort": {"enum": ["low", "medium", "high", "xhigh", "max"]}, "format": _FORMAT},
}

# What count_tokens takes: the prompt-shaping fields of a Messages request.
_PROMPT_FIELDS = {
    "model": {"type": "string", "minLength": 1},
    "messages": {"type": "array", "minItems": 1, "items": _MESSAGE},
    "system": _CONTENT,
    "tools": {"type": "array", "items": _TOOL},
    "tool_choice": _TOOL_CHOICE,
    "thinking": _THINKING,
    "output_config": _OUTPUT_CONFIG,
    # The structured-outputs beta's name for output_config.format, which Anthropic still takes.
    "output_format": _FORMAT,
    # The MCP connector's servers (a beta): refused when not empty (anthropic_options.tool_fields).
    "mcp_servers": {"type": "array"},
    # vLLM's own field on its Anthropic routes (AnthropicMessagesRequest, AnthropicCountTokensRequest): variables for
    # the chat template, such as enable_thinking, checked as the chat route checks them.
    "chat_template_kwargs": {"type": "object"},
}

COUNT_SCHEMA = {"type": "object", "required": ["model", "messages"], "properties": _PROMPT_FIELDS}

MESSAGES_SCHEMA = {
    "type": "object",
    "required": ["model", "messages", "max_tokens"],
    "properties": {
        **_PROMPT_FIELDS,
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": _INT32_MAX},
        "stop_sequences": {"type": "array", "maxItems": MAX_STOPS, "items": {"type": "string"}},
        "stream": {"type": "boolean"},
        "temperature": {"type": "number", "minimum": 0, "maximum": 1},
        "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "top_k": {"type": "integer", "minimum": 0, "maximum": _INT32_MAX},
        "metadata": {"type": ["object", "null"]},
    },
}

# Accepted with no effect here: request bookkeeping and Anthropic-hosted features that change nothing in the output.
_NO_EFFECT = frozenset({"metadata", "service_tier", "cache_control", "context_management", "container"})
_VALIDATORS = {id(schema): Draft202012Validator(schema) for schema in (MESSAGES_SCHEMA, COUNT_SCHEMA)}
_unknown = OnceLog("ignoring unknown Anthropic request fields %s")
# The request's config objects, whose optional keys the SDKs type Optional (ThinkingConfigAdaptiveParam.display,
# OutputConfigParam.effort and .format, ...): a key of theirs sent as null is absent too, as a top-level one is.
_CONFIGS = ("thinking", "output_config", "tool_choice")


def _where(path) -> str:
    return ".".join(str(part) for part in path)


def check_sizes(body: Any, ctx: int) -> None:
    """400 at once for lists too long to use, before the schema validator walks every item of them. Tools are not
    capped at OpenAI's 128 (Anthropic, vLLM and Ollama take more: Claude Code with a few MCP servers sends 160):
    like messages, only more of them than the context holds tokens cannot fit."""
    if not isinstance(body, dict):
        return
    stops = body.get("stop_sequences")
    if isinstance(stops, list) and len(stops) > MAX_STOPS:
        raise InvalidRequest(f"stop_sequences: {len(stops)} items given; at most {MAX_STOPS} are accepted",
                             param="stop_sequences")
    # Every message and every tool renders to at least one token, so more of either than the context cannot fit.
    for name in ("messages", "tools"):
        items = body.get(name)
        if isinstance(items, list) and len(items) >= ctx:
            raise ContextLengthExceeded(f"prompt is too long: at least {len(items)} tokens ({len(items)} {name}) > "
                                        f"{ctx} maximum", param=name).counts(ctx, len(items), at_least=True)


def validate(body: Any, schema: dict) -> dict:
    """body (integral floats made ints, null optional fields dropped, also in the config objects: _CONFIGS) when it
    matches schema, else a 400 naming the first bad field; unknown fields are logged once and ignored (vLLM and Ollama
    ignore them too)."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", code="invalid_type")
    # An optional field sent as null is absent, as vLLM's (pydantic Optional) and Ollama's (Go pointer) layers read it.
    body = {name: value for name, value in body.items() if value is not None or name in schema["required"]}
    for name in _CONFIGS:
        if isinstance(body.get(name), dict):
            required = schema["properties"][name].get("required", ())
            body[name] = {key: value for key, value in body[name].items() if value is not None or key in required}
    error = next(iter(sorted(_VALIDATORS[id(schema)].iter_errors(body), key=lambda e: list(e.path))), None)
    if error is not None:
        where = _where(error.path)
        if error.validator == "required":
            missing = next((key for key in error.validator_value if key not in error.instance), "")
            field = f"{where}.{missing}" if where else missing
            raise InvalidRequest(f"{field}: Field required", param=field, code="missing_required_parameter")
        raise InvalidRequest(f"{where or 'body'}: {error_message(error)}", param=where or None)
    _unknown.note(name for name in body if name not in schema["properties"] and name not in _NO_EFFECT)
    return integral(body, schema)
