"""Gateway process: SGLang's own request fields on the /v1 routes (the "extra parameters for SRT backend" of its
ChatCompletionRequest and CompletionRequest, python/sglang/srt/entrypoints/openai/protocol.py), read as SGLang reads
them: its constrained decoding as vLLM's guided decoding, its no_stop_trim as include_stop_str_in_output, and the
fields that ask for what this server does not do refused by name. They were dropped as unknown fields: "regex" gave
unconstrained text."""
from __future__ import annotations

from typing import Any, Callable

from gateway.errors import InvalidRequest

_STR, _FLAG = {"type": ["string", "null"]}, {"type": ["boolean", "null"]}

# Their types, merged into the /v1 request schemas (a wrong type is a 400 naming the field).
SCHEMA = {
    # Constrained output (gateway.openai_fields reads them with vLLM's guided_regex / guided_grammar): a regular
    # expression, and an EBNF grammar (xgrammar's, GBNF's `root ::= ...`, converted to Lark as guided_grammar's).
    "regex": _STR,
    "ebnf": _STR,
    # Keep the matched stop string at the end of the text: vLLM's include_stop_str_in_output.
    "no_stop_trim": _FLAG,
    "stop_regex": {"type": ["string", "array", "null"], "items": {"type": "string"}},
    "lora_path": {"type": ["string", "array", "null"]},
    "custom_logit_processor": {"type": ["string", "array", "null"]},
    "input_ids": {"type": ["array", "null"], "items": {"type": "integer"}},
    # Output this server cannot give: the model's hidden states (true, or "last": the last token's), and an MoE
    # model's expert routing per token.
    "return_hidden_states": {"anyOf": [{"type": ["boolean", "null"]}, {"enum": ["last"]}]},
    "return_routed_experts": _FLAG,
    # A prompt continued from an SGLang session's earlier KV (its id, offset, replace): no session is kept here.
    "session_params": {"type": ["object", "null"]},
    # Each chat choice's prompt ids (honoured, not streamed, as SGLang); its per-choice meta_info is not served.
    "return_prompt_token_ids": _FLAG,
    "return_meta_info": _FLAG,
    # The prompt tokens read from the prefix cache, by tier (cached_tokens_sglext).
    "return_cached_tokens_details": _FLAG,
    # The request's id, which SGLang answers with (gateway.openai_routes.response_id); a list per prompt.
    "rid": {"type": ["string", "array", "null"], "items": {"type": "string"}},
}

# What the grammar fields are: (kind, field) in gateway.openai_fields' terms.
GUIDED_KINDS = (("regex", "regex"), ("grammar", "ebnf"))


def _given(value: Any) -> bool:
    return value is not None and value != [] and value != ""


# field -> (is the request asking for it?, why it is refused). Each changes the output in SGLang.
REFUSED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "stop_regex": (_given, "stop strings are plain text here (stop); regular-expression stops are not supported"),
    "lora_path": (lambda v: _given(v) and v != [None],
                  "this server loads no LoRA adapters: the base model would answer in the adapter's place"),
    "custom_logit_processor": (_given, "custom logit processors are not supported"),
    "input_ids": (_given, "a chat prompt given as token ids is not supported: send messages (or the ids to "
                          "/v1/completions as its prompt)"),
    "return_hidden_states": (lambda v: v not in (None, False), "hidden states are not returned: this server "
                                                                "answers with text, token ids and logprobs only"),
    "return_routed_experts": (bool, "per-token expert routing is not returned"),
    "session_params": (lambda v: v not in (None, {}), "sessions are not kept: send the whole prompt in each request"),
    "return_meta_info": (bool, "SGLang's meta_info is not returned: ask for return_token_ids (each choice's token_ids "
                               "and the prompt's), return_prompt_token_ids and logprobs instead"),
}


def choice_prompt_ids(body: dict, stream: bool) -> bool:
    """SGLang's return_prompt_token_ids: each chat choice carries its prompt's ids (prompt_token_ids), non-streamed
    only, as SGLang's serving_chat refuses it with stream."""
    if not body.get("return_prompt_token_ids"):
        return False
    if stream:
        raise InvalidRequest("return_prompt_token_ids is not supported with streaming. Please set stream=false when "
                             "using return_prompt_token_ids=true.", param="return_prompt_token_ids")
    return True


def cached_tokens_sglext(usage) -> dict:
    """SGLang's sglext for return_cached_tokens_details: the prompt tokens read from the prefix cache by tier, all on
    the device here ("host" is SGLang's HiCache CPU tier). SGLang's serving_chat and serving_completions put it beside
    the choices, and on a stream in a chunk of its own with no choices, after the finish chunks and before the usage
    chunk; its bench_serving --cache-report reads it there."""
    return {"cached_tokens_details": {"device": usage.cached_tokens, "host": 0}}


def include_stop(body: dict) -> bool:
    """vLLM's include_stop_str_in_output, or SGLang's no_stop_trim (either keeps the matched stop string)."""
    return bool(body.get("include_stop_str_in_output") or body.get("no_stop_trim"))
