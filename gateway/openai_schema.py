"""Gateway process: JSON schemas of the OpenAI request bodies; a violation becomes a 400 naming the field."""
from __future__ import annotations

from gateway.list_limits import MAX_N, MAX_PROMPTS, MAX_STOPS
from gateway.llama_cpp_fields import SCHEMA as LLAMA_CPP_FIELDS
from gateway.sglang_fields import SCHEMA as SGLANG_FIELDS
from gateway.openai_fields import STRUCTURED_OUTPUTS
from gateway.openai_sampling import TEXTGEN_TOKEN_FIELDS
from gateway.schema_validate import compile_schema
from gateway.tool_choice import TOOL_CHOICE

_INT32_MAX = (1 << 31) - 1   # proto int32 fields
_STR_OR_NULL = {"type": ["string", "null"]}
_BOOL_OR_NULL = {"type": ["boolean", "null"]}
# A logit_bias value: any number, served within +-100 (llama_cpp_fields.bias_value), as vLLM clamps it
# (SamplingParams.from_optional) and llama.cpp adds it as sent; false is llama.cpp's ban.
_BIAS = {"type": ["number", "boolean"]}
# Reasoning efforts a request may name: OpenAI's, and Ollama's "max" (its /v1 documents it) and "ultra" (clients add
# that tier; Ollama's thinkFromReasoningEffort takes it), which gateway.openai reads as the template's "xhigh".
EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra", None]

_TOOL_CALL = {
    "type": "object",
    "required": ["function"],
    "properties": {
        "id": _STR_OR_NULL,
        "type": {"enum": ["function", None]},
        "function": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 1},
                           "arguments": {"type": ["string", "object", "null"]}},
        },
    },
}

_MESSAGE = {
    "type": "object",
    "required": ["role"],
    "properties": {
        "role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {"type": ["string", "array", "null"],
                    "items": {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}}}},
        "name": _STR_OR_NULL,
        "tool_calls": {"type": ["array", "null"], "items": _TOOL_CALL},
        "tool_call_id": _STR_OR_NULL,
        "reasoning_content": _STR_OR_NULL,
        "reasoning": _STR_OR_NULL,
        "thinking": _STR_OR_NULL,
    },
}

_TOOL = {
    "type": "object",
    "required": ["type", "function"],
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name"],
            # Its characters and length are the calling API's (openai_checks.check_tools: OpenAI's 64 on /v1).
            "properties": {"name": {"type": "string", "minLength": 1},
                           "description": _STR_OR_NULL,
                           "parameters": {"type": ["object", "null"]},
                           "strict": _BOOL_OR_NULL},
        },
    },
}

_STOP = {"anyOf": [{"type": ["string", "null"]},
                   {"type": "array", "maxItems": MAX_STOPS, "items": {"type": "string"}}]}

# Fields shared by chat and legacy completions, with OpenAI's ranges.
_COMMON = {
    "model": _STR_OR_NULL,
    "stream": _BOOL_OR_NULL,
    "stream_options": {"type": ["object", "null"],
                       "properties": {"include_usage": _BOOL_OR_NULL, "continuous_usage_stats": _BOOL_OR_NULL}},
    # Ranges of max_tokens / max_completion_tokens are checked in openai_checks (one message per field).
    "max_tokens": {"type": ["integer", "null"]},
    "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
    "top_p": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1},
    "top_k": {"type": ["integer", "null"], "minimum": -1, "maximum": _INT32_MAX},
    "min_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
    "seed": {"type": ["integer", "null"], "minimum": -(1 << 63), "maximum": (1 << 64) - 1},
    "presence_penalty": {"type": ["number", "null"], "minimum": -2, "maximum": 2},
    "frequency_penalty": {"type": ["number", "null"], "minimum": -2, "maximum": 2},
    "repetition_penalty": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 10},
    # LM Studio's name for it (its /v1 lists repeat_penalty among the supported fields); repetition_penalty wins.
    "repeat_penalty": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 10},
    # llama.cpp server's locally typical sampling (its /v1 routes take every /completion option; 1 = off).
    "typical_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
    # OpenAI's {token id: bias}, or llama.cpp's [[token id or text, bias], ...]; a bias of false is llama.cpp's ban.
    "logit_bias": {"type": ["object", "array", "null"], "additionalProperties": _BIAS,
                   "items": {"type": "array", "minItems": 2, "maxItems": 2,
                             "prefixItems": [{"type": ["integer", "string"], "minimum": 0}, _BIAS]}},
    # OpenAI's bound ("Invalid 'n': integer above maximum value. Expected a value <= 128"); vLLM sets none.
    "n": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_N},
    "stop": _STOP,
    "stop_token_ids": {"type": ["array", "null"], "maxItems": 64,
                       "items": {"type": "integer", "minimum": 0, "maximum": _INT32_MAX}},
    "ignore_eos": _BOOL_OR_NULL,
    "min_tokens": {"type": ["integer", "null"], "minimum": 0, "maximum": _INT32_MAX},  # vLLM; <= max_tokens
    "user": _STR_OR_NULL,
    # vLLM extensions honoured here (guided_* and structured_outputs are checked in openai_fields).
    "include_stop_str_in_output": _BOOL_OR_NULL,
    "skip_special_tokens": _BOOL_OR_NULL,
    "truncate_prompt_tokens": {"type": ["integer", "null"], "minimum": -1},
    "guided_choice": {"type": ["array", "null"], "items": {"type": "string"}},
    "guided_json": {"type": ["object", "string", "null"]},
    "guided_regex": _STR_OR_NULL,
    "guided_grammar": _STR_OR_NULL,
    "structured_outputs": STRUCTURED_OUTPUTS,
    # Its bounds and those of top_logprobs and completions' logprobs: gateway.logprob_limits, in vLLM's words.
    "prompt_logprobs": {"type": ["integer", "null"]},
    # Refused or without effect here (openai_fields), typed as vLLM's request models type them: a wrong type is
    # vLLM's 400, and the checks that read the value (best_of < n) never see a string (a 500).
    "best_of": {"type": ["integer", "null"], "minimum": 1},
    "length_penalty": {"type": ["number", "null"]},
    "use_beam_search": _BOOL_OR_NULL,
    "return_tokens_as_token_ids": _BOOL_OR_NULL,
    "allowed_token_ids": {"type": ["array", "null"], "items": {"type": "integer"}},
    "bad_words": {"type": ["array", "null"], "items": {"type": "string"}},
    # The token lists of the text-completion servers SillyTavern's presets target (openai_sampling.token_list).
    **TEXTGEN_TOKEN_FIELDS,
    # text-generation-webui's and TabbyAPI's name for llama.cpp's grammar (openai_fields reads it as that).
    "grammar_string": {"type": ["string", "null"]},
    # text-generation-webui's (and transformers' generate) switch: false is greedy decoding (openai_sampling).
    "do_sample": _BOOL_OR_NULL,
    "mirostat": {"type": ["integer", "null"]},
    # llama-cpp-python's server names (llama_cpp/server/types.py): its mirostat switch, read as llama.cpp's, and
    # how its logit_bias keys read: token ids, or texts whose tokens are biased (openai_sampling).
    "mirostat_mode": {"type": ["integer", "null"]},
    "logit_bias_type": {"enum": ["input_ids", "tokens", None]},
    "guided_whitespace_pattern": _STR_OR_NULL,
    "prompt_embeds": {"type": ["string", "array", "null"]},
    # vLLM 0.2x: truncate_prompt_tokens' side (honoured), and fields refused or without effect (openai_fields).
    "truncation_side": {"enum": ["left", "right", None]},
    "logprob_token_ids": {"type": ["array", "null"], "items": {"type": "integer"}},
    "repetition_detection": {"type": ["object", "null"]},
    # Its flattened form since (vLLM's CompletionRequest / ChatCompletionRequest: ints, default 0), served.
    **{name: {"type": ["integer", "null"]} for name in (
        "max_repetition_pattern_size", "min_repetition_pattern_size", "repetition_min_count")},
    "watermarking": _BOOL_OR_NULL,
    "stream_interval": {"type": ["integer", "null"], "minimum": 1},
    "session_id": _STR_OR_NULL,
    "logits_processors": {"type": ["array", "null"]},
    "metadata": {"type": ["object", "null"]},
    "store": _BOOL_OR_NULL,
    "service_tier": _STR_OR_NULL,
    "priority": {"type": ["integer", "null"], "minimum": -(1 << 63), "maximum": (1 << 63) - 1},   # vLLM: int64
    "request_id": _STR_OR_NULL,
    "cache_salt": {"type": ["string", "null"], "maxLength": 1024},   # vLLM: Field(min_length=1, max_length=1024)
    "spaces_between_special_tokens": _BOOL_OR_NULL,
    "add_special_tokens": _BOOL_OR_NULL,
    "return_token_ids": _BOOL_OR_NULL,
    "kv_transfer_params": {"type": ["object", "null"]},   # vLLM: Optional[dict]
    # vLLM: dict[str, str | int | float | list[str | int | float]] (pydantic's lax mode takes a bool as an int).
    "vllm_xargs": {"type": ["object", "null"], "additionalProperties": {
        "type": ["string", "number", "boolean", "array"], "items": {"type": ["string", "number", "boolean"]}}},
    # vLLM 0.2x's fields for its render routes and routed-expert data, typed as its requests type them.
    "ec_transfer_params": {"type": ["object", "null"]},
    "routed_experts_prompt_start": {"type": ["integer", "null"], "minimum": 0},
    "return_token_offsets": _BOOL_OR_NULL, "return_mm_kwargs": _BOOL_OR_NULL,
    "safety_identifier": _STR_OR_NULL,                    # OpenAI: string
    "prompt_cache_key": _STR_OR_NULL,                     # OpenAI: string
    "verbosity": {"enum": ["low", "medium", "high", None]},   # OpenAI
    **LLAMA_CPP_FIELDS,
    **SGLANG_FIELDS,
}

# json_schema.name is required, as OpenAI and vLLM (its JsonSchemaResponseFormat) require it; the missing schema is
# structured.response_format_schema's 400.
# structural_tag: vLLM's LegacyStructuralTagResponseFormat (structures of begin, schema, end; triggers).
_STRUCTURE = {"type": "object", "required": ["begin", "end"],
              "properties": {"begin": {"type": "string", "minLength": 1}, "end": {"type": "string"},
                             "schema": {"type": ["object", "null"]}}}
_RESPONSE_FORMAT = {"type": ["object", "null"], "required": ["type"],
                    "properties": {"type": {"enum": ["text", "json_object", "json_schema", "structural_tag"]},
                                   "json_schema": {"type": "object", "required": ["name"],
                                                   "properties": {"name": {"type": "string"}}},
                                   "structures": {"type": ["array", "null"], "items": _STRUCTURE},
                                   "triggers": {"type": ["array", "null"], "items": {"type": "string"}}}}

CHAT_SCHEMA = {
    "type": "object",
    "required": ["messages"],
    "properties": {
        **_COMMON,
        "messages": {"type": "array", "minItems": 1, "items": _MESSAGE},
        "max_completion_tokens": {"type": ["integer", "null"]},
        "logprobs": _BOOL_OR_NULL,
        "top_logprobs": {"type": ["integer", "null"]},
        # OpenAI refuses an empty list ("[] is too short - 'tools'"), and so does vLLM since its check_tool_usage.
        "tools": {"type": ["array", "null"], "minItems": 1, "items": _TOOL},
        "tool_choice": TOOL_CHOICE,
        "parallel_tool_calls": _BOOL_OR_NULL,
        "response_format": _RESPONSE_FORMAT,
        "enable_thinking": _BOOL_OR_NULL,
        "add_generation_prompt": _BOOL_OR_NULL,
        "continue_final_message": _BOOL_OR_NULL,
        "chat_template": _STR_OR_NULL, "template_vars": {"type": ["object", "null"]},  # TabbyAPI's name for:
        "chat_template_kwargs": {"type": ["object", "null"],
                                 "properties": {"enable_thinking": _BOOL_OR_NULL,
                                                "preserve_thinking": _BOOL_OR_NULL}},
        "reasoning_effort": {"enum": EFFORTS},
        # OpenRouter's unified reasoning switch: effort, max_tokens (a reasoning budget), exclude, enabled.
        "reasoning": {"type": ["object", "null"],
                      "properties": {"effort": {"enum": EFFORTS},
                                     "max_tokens": {"type": ["integer", "null"], "minimum": 0, "maximum": _INT32_MAX},
                                     "exclude": _BOOL_OR_NULL, "enabled": _BOOL_OR_NULL}},
        "include_reasoning": _BOOL_OR_NULL,   # vLLM's: false leaves the reasoning out of the answer
        "separate_reasoning": _BOOL_OR_NULL, "stream_reasoning": _BOOL_OR_NULL,   # SGLang's (reasoning.py)
        "return_prompt_text": _BOOL_OR_NULL,   # vLLM's: the rendered prompt as prompt_text
        "_debug_render_only": _BOOL_OR_NULL,   # Ollama's /v1: the rendered prompt in _debug_info, nothing generated
        # vLLM's: at most this many reasoning tokens, then </think> (-1: unbounded)
        "thinking_token_budget": {"type": ["integer", "null"], "minimum": -1, "maximum": _INT32_MAX},
        # vLLM's: passed to the chat template (RAG templates render them), each a {title, text, ...} object.
        "documents": {"type": ["array", "null"],
                      "items": {"type": "object", "additionalProperties": {"type": "string"}}},   # dict[str, str]
        # vLLM: dict[str, Any] and dict[str, dict[str, Any]] (the HF processor's and each media connector's kwargs).
        "mm_processor_kwargs": {"type": ["object", "null"]},
        "media_io_kwargs": {"type": ["object", "null"], "additionalProperties": {"type": "object"}},
        # Refused on chat (openai_fields), typed as vLLM and OpenAI type them.
        "echo": _BOOL_OR_NULL,
        "modalities": {"type": ["array", "null"], "items": {"type": "string"}},
        "audio": {"type": ["object", "null"]},
        # OpenAI's ChatCompletionPredictionContentParam; accepted and not used (openai_fields.NO_EFFECT).
        "prediction": {"type": ["object", "null"], "required": ["type", "content"], "properties": {
            "type": {"enum": ["content"]},
            "content": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]}}},
    },
}

_TOKEN_IDS = {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0, "maximum": _INT32_MAX}}

COMPLETION_SCHEMA = {
    "type": "object",
    "required": ["prompt"],
    "properties": {
        **_COMMON,
        "prompt": {"anyOf": [
            {"type": "string"},
            {"type": "array", "minItems": 1, "maxItems": MAX_PROMPTS, "items": {"type": "string"}},
            _TOKEN_IDS,
            {"type": "array", "minItems": 1, "maxItems": MAX_PROMPTS, "items": _TOKEN_IDS},
        ]},
        "echo": _BOOL_OR_NULL,
        "logprobs": {"type": ["integer", "null"]},
        "suffix": _STR_OR_NULL,
        "response_format": _RESPONSE_FORMAT,     # vLLM's CompletionRequest takes it as chat does
        # The reasoning budgets a prompt that leaves its thinking open is held to (gateway.thinking_budget), typed as
        # chat types them: read untyped here, a `reasoning` that was no object was a 500 and a budget "x" a grammar
        # error. Of OpenRouter's `reasoning` only max_tokens acts on a raw prompt (no template to switch).
        "thinking_token_budget": CHAT_SCHEMA["properties"]["thinking_token_budget"],
        "reasoning": CHAT_SCHEMA["properties"]["reasoning"],
    },
}

TOKENIZE_SCHEMA = {
    "type": "object",
    "properties": {
        "model": _STR_OR_NULL,
        "messages": CHAT_SCHEMA["properties"]["messages"],
        "prompt": {"type": "string"},
        "tools": {"type": ["array", "null"], "items": _TOOL},
        "add_generation_prompt": _BOOL_OR_NULL,
        "continue_final_message": _BOOL_OR_NULL,
        "chat_template": CHAT_SCHEMA["properties"]["chat_template"],
        "enable_thinking": _BOOL_OR_NULL,
        "chat_template_kwargs": CHAT_SCHEMA["properties"]["chat_template_kwargs"],
        # The other chat fields the rendering reads (chat_prompt_text: tool_choice forces a call or hides the tools,
        # the reasoning switches reach the template), typed as chat types them: untyped, `reasoning: 5` or
        # `tool_choice: {}` was an AttributeError or a KeyError here, a 500.
        **{key: CHAT_SCHEMA["properties"][key] for key in ("tool_choice", "reasoning_effort", "reasoning", "template_vars")},
        "return_token_strs": _BOOL_OR_NULL,
        # vLLM's TokenizeCompletionRequest / TokenizeChatRequest: a bool (no special tokens are added here either way:
        # the served tokenizer adds none to a prompt).
        "add_special_tokens": _BOOL_OR_NULL,
        # llama.cpp server's /tokenize: its text (or strings and token ids mixed), whether to add BOS/EOS (none here
        # either way) and to parse special tokens (false: as plain text), and each id's text with it.
        "content": {"type": ["string", "array"], "items": {"type": ["string", "integer"], "minimum": 0}},
        "add_special": _BOOL_OR_NULL,
        "parse_special": _BOOL_OR_NULL,
        "with_pieces": _BOOL_OR_NULL,
    },
}

DETOKENIZE_SCHEMA = {
    "type": "object",
    "required": ["tokens"],
    "properties": {
        "model": _STR_OR_NULL,
        "tokens": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": _INT32_MAX}},
    },
}

# Compiled once at import rather than on a first request.
for _schema in (CHAT_SCHEMA, COMPLETION_SCHEMA, TOKENIZE_SCHEMA, DETOKENIZE_SCHEMA):
    compile_schema(_schema)
