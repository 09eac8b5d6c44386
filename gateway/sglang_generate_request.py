"""Gateway process: SGLang's native POST /generate bodies (GenerateReqInput, python/sglang/srt/managers/io_struct.py;
its sampling_params, python/sglang/srt/sampling/sampling_params.py) -> the /v1/completions body they ask for."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional

from gateway.errors import ApiError, ContextLengthExceeded, InvalidRequest, Unsupported, renamed
from gateway.llama_cpp_fields import V1_MAX_TEMPERATURE

# SGLang's SamplingParams default output limit (max_new_tokens=128), where /v1/completions' is OpenAI's 16.
DEFAULT_MAX_NEW_TOKENS = 128

# sampling_params -> the /v1/completions field that means the same (vLLM's and SGLang's OpenAI names).
_SAMPLING = {"max_new_tokens": "max_tokens", "min_new_tokens": "min_tokens", "temperature": "temperature",
             "top_p": "top_p", "top_k": "top_k", "min_p": "min_p", "frequency_penalty": "frequency_penalty",
             "presence_penalty": "presence_penalty", "repetition_penalty": "repetition_penalty", "stop": "stop",
             "stop_token_ids": "stop_token_ids", "ignore_eos": "ignore_eos", "n": "n",
             "skip_special_tokens": "skip_special_tokens", "logit_bias": "logit_bias",
             "spaces_between_special_tokens": "spaces_between_special_tokens", "regex": "regex", "ebnf": "ebnf",
             "no_stop_trim": "no_stop_trim", "sampling_seed": "seed", "stop_regex": "stop_regex"}
# The /v1/completions field an error names -> the /generate sampling parameter sent (include_stop_str_in_output is
# no_stop_trim's reading, guided_json json_schema's).
_SENT_AS = {**{field: name for name, field in _SAMPLING.items()}, "guided_json": "json_schema",
            "include_stop_str_in_output": "no_stop_trim"}
# An error's field: its name, then any index or member path after it (stop_token_ids[0], prompt[1]).
_FIELD = re.compile(r"([^\[.]*)(.*)", re.S)
# The /v1/completions names in an error's message that /generate sends otherwise, and the prompt where a message
# quotes it ('prompt', 'prompt[0]').
_MESSAGE_RENAMES = [(re.compile(rf"\b{field}\b"), name) for field, name in _SENT_AS.items()
                    if field != name and field != "include_stop_str_in_output"]
_QUOTED_PROMPT = re.compile(r"'prompt(?=['\[])")
# sampling_params that change nothing here: how often a stream sends (each piece goes as it comes), and the
# arguments of a custom logit processor (none runs: custom_logit_processor itself is refused).
_SAMPLING_NO_EFFECT = ("stream_interval", "custom_params")
# Request fields read below, or that change nothing here (log_metrics, routing and tracing hints, an SGLang session id
# that does not alter the prompt, the prefix-cache key's extra and salt are read as vLLM's cache_salt).
_READ = ("text", "input_ids", "sampling_params", "stream", "return_logprob", "logprob_start_len", "top_logprobs_num",
         "return_text_in_logprobs", "rid", "model", "input_embeds", "image_data", "video_data", "audio_data",
         "return_prompt_token_ids")
_NO_EFFECT = ("log_metrics", "session_id", "routed_dp_rank", "data_parallel_rank", "routing_key", "conversation_id",
              "external_trace_header", "received_time", "no_logs", "custom_labels", "priority", "background",
              "bootstrap_host", "bootstrap_port", "bootstrap_room", "bootstrap_pair_key", "decode_tp_size",
              "disagg_prefill_dp_rank", "kv_router_hint", "extra_key", "http_worker_ipc")
# GenerateReqInput fields whose answer SGLang gives and this server cannot (field -> asks for it?, why): a 400 naming
# the field, as they were taken and dropped (token_ids_logprob gave no input/output_token_ids_logprobs, which scoring
# clients read the label logprobs from). token_ids_logprob asks only with return_logprob, as SGLang reads it.
_REFUSED = {
    "token_ids_logprob": (lambda body: body.get("return_logprob"), "the logprobs of chosen token ids are not returned "
                          "(top_logprobs_num's alternatives are); to score label tokens after a prompt, POST /v1/score "
                          "with label_token_ids"),
    "return_sampling_mask": (None, "the sampling support mask and renormalized logprobs are not returned"),
    "return_flat_raw_top_logprobs": (None, "top logprobs come as [logprob, token id, text] lists only"),
    "return_flat_raw_top_logprobs_b64": (None, "top logprobs come as [logprob, token id, text] lists only"),
    "return_entropy": (None, "per-token entropy is not returned"),
    "return_indexer_topk": (None, "this model has no sparse-attention indexer"),
    "positional_embed_overrides": (None, "embedding overrides are not supported: send text or input_ids"),
    "max_thinking_tokens": (None, "a thinking budget on /generate is not supported: send thinking_token_budget to "
                            "/v1/completions or /v1/chat/completions"),
}
# Media inputs: the model reads text only.
_MEDIA = ("image_data", "video_data", "audio_data")


@dataclass
class GenerateOptions:
    """How the answer is shaped: SGLang's logprob fields, the request id, whether it is a batch."""
    stream: bool = False
    return_logprob: bool = False
    top_logprobs_num: int = 0
    logprob_start_len: int = -1          # -1: output logprobs only (SGLang's default)
    text_in_logprobs: bool = False
    rid: object = None                   # a string, or one per prompt
    prompt_token_ids: bool = False       # return_prompt_token_ids: each answer carries its prompt's ids
    batch: bool = False                  # a list of prompts or n > 1: the answer is a list, streamed with "index"
    max_new_tokens: Optional[int] = DEFAULT_MAX_NEW_TOKENS
    # max_new_tokens was sent: SGLang's TokenizerManager refuses one past the context (its default, 128, is capped at
    # the room the prompt leaves by the scheduler's init_req_max_new_tokens)
    limit_sent: bool = False


def _prompt(body: dict):
    """text (one or a list) or input_ids (one list or a list of lists): exactly one of them, as SGLang's
    GenerateReqInput._validate_inputs asks ("Either text, input_ids or input_embeds should be provided.")."""
    if body.get("input_embeds") is not None:
        raise Unsupported("input_embeds is not supported: send text or input_ids", param="input_embeds")
    media = next((key for key in _MEDIA if body.get(key) not in (None, [])), None)
    if media:
        raise Unsupported(f"{media} is not supported: this server runs a text-only model", param=media)
    given = [key for key in ("text", "input_ids") if body.get(key) is not None]
    if len(given) != 1:
        raise InvalidRequest("Either text, input_ids or input_embeds should be provided.", param="text")
    prompt = body[given[0]]
    if given[0] == "text" and not (isinstance(prompt, str) or isinstance(prompt, list) and prompt
                                   and all(isinstance(item, str) for item in prompt)):
        raise InvalidRequest("text must be a string or a non-empty list of strings", param="text")
    return prompt


def _is_batch(prompt) -> bool:
    return isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], (str, list))


def _refuse(body: dict) -> None:
    """400 unsupported for a field in _REFUSED that asks for its answer (sent and not null, false, 0 or empty)."""
    for key, (applies, why) in _REFUSED.items():
        if body.get(key) not in (None, False, 0, [], {}, "") and (applies is None or applies(body)):
            raise Unsupported(f"{key}: {why}", param=key)


def _sampling(params, out: dict) -> None:
    """sampling_params into out under /v1/completions' names; an unknown one is a 400 naming it (SGLang's
    SamplingParams(**params) takes no other), so a misspelt limit is not silently dropped."""
    if isinstance(params, list):
        raise Unsupported("one sampling_params per prompt is not supported: send one object for the whole batch, or "
                          "one request per prompt", param="sampling_params")
    if not isinstance(params, dict):
        raise InvalidRequest("sampling_params must be an object", param="sampling_params")
    for key, value in params.items():
        if value is None and (key in _SAMPLING or key in ("json_schema", "structural_tag")):
            # SamplingParams' default for a field sent as null (clients write every field they know).
            continue
        if key == "temperature" and isinstance(value, int | float) and not isinstance(value, bool) and \
                value > V1_MAX_TEMPERATURE:
            # SGLang bounds it below only: /v1's schema reads it at OpenAI's 2, the route then sets it as sent
            out["temperature"] = V1_MAX_TEMPERATURE
        elif key in _SAMPLING:
            out[_SAMPLING[key]] = value
        elif key == "json_schema":
            out["guided_json"] = value
        elif key == "structural_tag":
            out["structured_outputs"] = {"structural_tag": value if isinstance(value, str) else json.dumps(value)}
        elif key not in _SAMPLING_NO_EFFECT:
            raise InvalidRequest(f"unknown sampling parameter '{key}'", param=f"sampling_params.{key}")


def _logprob_options(body: dict, options: GenerateOptions) -> None:
    options.return_logprob = bool(body.get("return_logprob"))
    options.text_in_logprobs = bool(body.get("return_text_in_logprobs"))
    for key in ("top_logprobs_num", "logprob_start_len"):
        value = body.get(key)
        if isinstance(value, list):
            raise Unsupported(f"one {key} per prompt is not supported: send one number", param=key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise InvalidRequest(f"{key} must be an integer", param=key)
    options.top_logprobs_num = body.get("top_logprobs_num") or 0
    start = body.get("logprob_start_len")
    options.logprob_start_len = -1 if start is None or not options.return_logprob else start
    if options.logprob_start_len < -1:
        raise InvalidRequest("logprob_start_len must be -1 or a prompt position", param="logprob_start_len")


def check_logprob_start(options: GenerateOptions, prompts: list) -> None:
    """SGLang's 400 for a logprob_start_len at or past a prompt's last token (its scheduler's handle_generate_request
    aborts the request as a BadRequestError, in these words); it was answered with an empty prompt window."""
    start = options.logprob_start_len
    for ids in prompts:
        if options.return_logprob and start >= len(ids):
            raise InvalidRequest(f"req.logprob_start_len={start} is higher than the number of input tokens "
                                 f"len(req.origin_input_ids)={len(ids)}. Please use a smaller logprob_start_len.",
                                 param="logprob_start_len")


def _sglang_param(param: Optional[str], prompt: str) -> Optional[str]:
    """The /generate field a /v1/completions error names: a sampling parameter under sampling_params (an item of a
    list one too: stop_token_ids[0]), the prompt as the field that carried it."""
    field, rest = _FIELD.match(param or "").groups()
    if field == "prompt":
        return prompt + rest
    if field in ("logprobs", "prompt_logprobs"):
        return "top_logprobs_num"
    return f"sampling_params.{_SENT_AS[field]}{rest}" if field in _SENT_AS else param


def as_sent(error: ApiError, body: dict) -> ApiError:
    """error, raised on the /v1/completions body, naming the /generate fields the client sent, in its param and its
    message (`invalid value for 'max_new_tokens'`, not 'max_tokens'), as SGLang's own errors name them
    (SamplingParams.verify: `min_new_tokens must be in [0, max_new_tokens(4)], got 10.`)."""
    prompt = "text" if body.get("text") is not None else "input_ids"
    error.param = _sglang_param(error.param, prompt)
    return renamed(error, [*_MESSAGE_RENAMES, (_QUOTED_PROMPT, "'" + prompt)])


def context_overflow_message(error: ContextLengthExceeded) -> str:
    """SGLang's words for a request past the context (TokenizerManager._validate_one_request), which clients match
    ("is longer than the model's context length": prime-rl's verifiers, agents' overflow patterns): the input alone,
    or the input plus the max_new_tokens sent."""
    if error.num_output is None:
        at_least = "at least " if error.at_least else ""
        return (f"The input ({at_least}{error.num_prompt} tokens) is longer than the model's context length "
                f"({error.ctx} tokens).")
    return (f"Requested token count exceeds the model's maximum context length of {error.ctx} tokens. You requested "
            f"a total of {error.num_prompt + error.num_output} tokens: {error.num_prompt} tokens from the input "
            f"messages and {error.num_output} tokens for the completion. Please reduce the number of tokens in the "
            f"input messages or the completion to fit within the limit.")


def completion_body(body) -> tuple[dict, GenerateOptions]:
    """The /v1/completions body (not streamed: the route streams it in SGLang's frames) and the answer's options."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", param=None)
    _refuse(body)
    unknown = [key for key in body if key not in _READ and key not in _NO_EFFECT and key not in _REFUSED]
    prompt = _prompt(body)
    out: dict = {"prompt": prompt, "max_tokens": DEFAULT_MAX_NEW_TOKENS}
    _sampling(body.get("sampling_params") or {}, out)
    limit = out["max_tokens"]
    if isinstance(limit, int) and not isinstance(limit, bool) and limit < 0:
        # SGLang's SamplingParams.verify words.
        raise InvalidRequest(f"max_new_tokens must be at least 0, got {limit}.", param="sampling_params.max_new_tokens")
    options = GenerateOptions(stream=bool(body.get("stream")), rid=body.get("rid"), max_new_tokens=limit,
                              limit_sent=(body.get("sampling_params") or {}).get("max_new_tokens") is not None,
                              prompt_token_ids=bool(body.get("return_prompt_token_ids")))
    _logprob_options(body, options)
    if options.return_logprob:
        out["logprobs"] = options.top_logprobs_num
    if options.logprob_start_len >= 0:
        # The prompt's logprobs from that position on: vLLM's prompt_logprobs.
        out["prompt_logprobs"] = options.top_logprobs_num
    if out["max_tokens"] == 0:
        # max_new_tokens 0 (scoring a prompt, as RL trainers do) reads the prompt and generates nothing: /v1's echo
        # is what lets a completions limit be 0.
        out["echo"] = True
    # The SGLang /v1 fields this route shares (lora_path, custom_logit_processor, return_hidden_states, ...) are read
    # as the /v1 routes read them: refused by name where they ask for what is not served.
    out.update({key: body[key] for key in unknown})
    if body.get("model") is not None:
        out["model"] = body["model"]
    options.batch = _is_batch(prompt) or (isinstance(out.get("n"), int) and out["n"] > 1)
    return out, options
