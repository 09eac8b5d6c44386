"""Gateway process: JSON schema of an OpenAI /v1/responses body (fields and ranges); a violation is a 400 naming it.

Input items and tool types are only sketched here (objects with a `type`): gateway.responses_input and
gateway.responses_request check them one by one, so that each refusal names the item and says why.
"""
from __future__ import annotations

from gateway.llama_cpp_fields import REFUSED as LLAMA_CPP_REFUSED, SCHEMA as LLAMA_CPP_FIELDS
from gateway.openai_schema import EFFORTS

_STR_OR_NULL = {"type": ["string", "null"]}
_BOOL_OR_NULL = {"type": ["boolean", "null"]}

_FUNCTION_TOOL = {
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 64},
                   "description": _STR_OR_NULL,
                   "parameters": {"type": ["object", "null"]},
                   "strict": _BOOL_OR_NULL},
}

_TOOL = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"type": "string"}},
    "if": {"properties": {"type": {"const": "function"}}},
    "then": _FUNCTION_TOOL,
}

_TOOL_CHOICE = {
    "anyOf": [
        {"enum": ["none", "auto", "required", None]},
        {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}},
         "allOf": [{"if": {"properties": {"type": {"const": "function"}}},
                    "then": {"required": ["name"], "properties": {"name": {"type": "string"}}}},
                   {"if": {"properties": {"type": {"const": "allowed_tools"}}},
                    "then": {"required": ["mode", "tools"],
                             "properties": {"mode": {"enum": ["auto", "required"]},
                                            "tools": {"type": "array", "minItems": 1,
                                                      "items": {"type": "object", "required": ["type"]}}}}}]},
    ],
}

_JSON_SCHEMA_FORMAT = {
    "required": ["name", "schema"],
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 64},
                   "schema": {"type": "object"},
                   "description": _STR_OR_NULL,
                   "strict": _BOOL_OR_NULL},
}

_TEXT = {
    "type": ["object", "null"],
    "properties": {
        "format": {"type": ["object", "null"], "required": ["type"],
                   "properties": {"type": {"enum": ["text", "json_object", "json_schema"]}},
                   "if": {"properties": {"type": {"const": "json_schema"}}},
                   "then": _JSON_SCHEMA_FORMAT},
        "verbosity": {"enum": ["low", "medium", "high", None]},
    },
}

# What `include` may name: OpenAI's ResponseIncludable (the openai SDK's types/responses/response_includable.py, from
# OpenAI's API spec); OpenAI and vLLM refuse any other value. Only message.output_text.logprobs and
# reasoning.encrypted_content add anything here: the others name output of hosted tools, which are not served.
INCLUDABLE = ["file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
              "message.input_image.image_url", "computer_call_output.output.image_url", "code_interpreter_call.outputs",
              "reasoning.encrypted_content", "message.output_text.logprobs"]

# vLLM's Responses extensions (its ResponsesRequest), passed to the chat route as they are (its schema checks them):
# chat_template_kwargs reach the template (enable_thinking wins over reasoning.effort there, as in vLLM's
# build_chat_params), structured_outputs constrain the answer; include_reasoning false (vLLM's chat field, which clients
# send here too: vllm-project/vllm#56428) leaves the reasoning item out, as it leaves a chat answer's reasoning out.
PASSTHROUGH = ("top_k", "min_p", "seed", "stop", "stop_token_ids", "repetition_penalty", "presence_penalty",
               "frequency_penalty", "logit_bias", "ignore_eos", "include_stop_str_in_output", "min_tokens",
               "chat_template_kwargs", "structured_outputs", "skip_special_tokens", "include_reasoning")

RESPONSES_SCHEMA = {
    "type": "object",
    "properties": {
        "model": _STR_OR_NULL,
        # An item's type names its handler: a string (absent or null on a bare {"role", "content"} message).
        "input": {"type": ["string", "array"],
                  "items": {"type": "object", "properties": {"type": _STR_OR_NULL},
                            # Codex CLI's tools (responses_tools.placed_tools), typed as top-level tools are.
                            "if": {"properties": {"type": {"const": "additional_tools"}}, "required": ["type"]},
                            "then": {"required": ["tools"],
                                     "properties": {"tools": {"type": "array", "items": _TOOL}}}}},
        "instructions": _STR_OR_NULL,
        # Its range (>= 1) is checked by the chat route, which words the message.
        "max_output_tokens": {"type": ["integer", "null"]},
        "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
        "top_p": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1},
        "tools": {"type": ["array", "null"], "items": _TOOL},
        "tool_choice": _TOOL_CHOICE,
        "parallel_tool_calls": _BOOL_OR_NULL,
        "max_tool_calls": {"type": ["integer", "null"], "minimum": 0},
        "text": _TEXT,
        "reasoning": {"type": ["object", "null"],
                      "properties": {"effort": {"enum": EFFORTS},
                                     "summary": {"enum": ["auto", "concise", "detailed", None]},
                                     "generate_summary": {"enum": ["auto", "concise", "detailed", None]}}},
        "stream": _BOOL_OR_NULL,
        "stream_options": {"type": ["object", "null"], "properties": {"include_obfuscation": _BOOL_OR_NULL}},
        "store": _BOOL_OR_NULL,
        "background": _BOOL_OR_NULL,
        "previous_response_id": _STR_OR_NULL,
        "conversation": {"type": ["string", "object", "null"]},
        "prompt": {"type": ["object", "null"]},
        "metadata": {"type": ["object", "null"], "maxProperties": 16,
                     "additionalProperties": {"type": "string", "maxLength": 512}},
        "user": _STR_OR_NULL,
        "safety_identifier": _STR_OR_NULL,
        "prompt_cache_key": _STR_OR_NULL,
        # OpenAI's ResponseCreateParams: Literal["in_memory", "24h"] (how long its prompt cache keeps the prefix).
        "prompt_cache_retention": {"enum": ["in_memory", "24h", None]},
        # vLLM's ResponsesRequest types it Literal["auto", "default", "flex", "scale", "priority"] (OpenAI's tiers): a
        # tier outside them is its 400, not a value taken and ignored.
        "service_tier": {"enum": ["auto", "default", "flex", "scale", "priority", None]},
        "include": {"type": ["array", "null"], "items": {"enum": INCLUDABLE}},
        "top_logprobs": {"type": ["integer", "null"], "minimum": 0, "maximum": 20},
        "truncation": {"enum": ["auto", "disabled", None]},
        # vLLM's: the response's id as given (its ResponsesRequest.request_id; vllm-project/vllm#25428).
        "request_id": {"type": ["string", "null"], "minLength": 1},
        **{name: {} for name in PASSTHROUGH},
        # The llama.cpp samplers /v1 refuses (dry_multiplier above 0, ...) are refused here too, typed as /v1 types
        # them: untyped, a string was compared with 0 (a TypeError, a 500).
        **{name: LLAMA_CPP_FIELDS[name] for name in LLAMA_CPP_REFUSED if name in LLAMA_CPP_FIELDS},
    },
}
