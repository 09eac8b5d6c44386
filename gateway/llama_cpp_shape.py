"""Gateway process: llama.cpp server's own /completion bodies (its non-OpenAI shape) from engine output."""
from __future__ import annotations

import math
import time
from typing import Optional

from gateway.engine import Delta, Usage
from gateway.errors import ApiError, ContextLengthExceeded, InvalidRequest
from gateway.llama_cpp_fields import RANDOM_SEED
from gateway.llama_cpp_samplers import DEFAULT_SAMPLERS
from gateway.llama_cpp_timings import llama_timings
from gateway.model import ModelCard
from gateway.ollama_models import embedding_length, model_details, model_size
from gateway.openai_shape import SSE_HEADERS, post_sampling_entry
from gateway.stream import SseFramer, sse_event

# The routes only llama.cpp's server has: their errors come in its shape.
LLAMA_CPP_PATHS = frozenset({"/completion", "/completions", "/props", "/slots", "/apply-template", "/infill",
                             "/embedding", "/embeddings", "/rerank", "/reranking", "/v1/rerank", "/v1/reranking",
                             "/lora-adapters"})
# llama.cpp's error types by status (tools/server/server-common.cpp format_error_response); a full queue (429 here,
# where llama.cpp would wait) is its unavailable_error too: the server cannot take the request now.
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "unavailable_error", 501: "not_supported_error", 503: "unavailable_error"}


def is_llama_cpp_path(path: str) -> bool:
    """Whether `path` (trailing slashes ignored) is one of llama.cpp server's own routes, whose errors take its error
    shape (LLAMA_CPP_PATHS, /slots/{id})."""
    path = path.rstrip("/") or "/"
    # /slots/{id_slot}: llama.cpp's save / restore / erase of one slot.
    return path in LLAMA_CPP_PATHS or path.startswith("/slots/")


def llama_cpp_error(error: ApiError) -> dict:
    """llama.cpp's error object: {"error": {"code": the HTTP status, "message", "type"}}; a prompt past the context is
    its exceed_context_size_error with n_prompt_tokens and n_ctx, worded as its server-context.cpp words it
    ("request (N tokens) exceeds the available context size (M tokens), try increasing it"), which agents parse for
    the window to compact to (hermes-agent's parse_context_limit_from_error, PR #89504). OpenAI's param is kept
    where one is named."""
    fallback = "server_error" if error.status >= 500 else "invalid_request_error"
    body = {"code": error.status, "message": error.message, "type": _ERROR_TYPES.get(error.status, fallback)}
    if isinstance(error, ContextLengthExceeded) and error.ctx is not None:
        body.update(type="exceed_context_size_error", n_prompt_tokens=error.num_prompt, n_ctx=error.ctx)
        if error.num_output is None:
            at_least = "at least " if error.at_least else ""
            body["message"] = (f"request ({at_least}{error.num_prompt} tokens) exceeds the available context size "
                               f"({error.ctx} tokens), try increasing it")
    if error.param:
        body["param"] = error.param
    return {"error": body}


def params_json(sampling, n_predict: int, stop: list, ignore_eos: bool, stream: bool, n_probs: int = 0,
                timings_per_token: bool = False) -> dict:
    """Sampling settings under llama.cpp's names, every key its task params' to_json writes (server-task.cpp) but
    chat_format, speculative.* and the grammar's (grammar, grammar_lazy, grammar_triggers, preserved_tokens): n_predict
    -1 is no limit (also as max_tokens, which llama.cpp writes beside it), repeat_last_n -1 the whole context, seed
    4294967295 random; no tokens are kept or discarded on a context shift (n_keep, n_discard 0: the context does not
    shift here); every sampler's settings as the request set them (each runs here: worker/sampling_chain.py,
    worker/dry.py, worker/mirostat.py); logit_bias as its format_logit_bias writes it ([{"bias", "token"}]); no LoRA or backend sampling."""
    return {"n_predict": n_predict, "max_tokens": n_predict, "n_keep": 0, "n_discard": 0,
            "seed": RANDOM_SEED if sampling.seed is None else sampling.seed,
            "temperature": sampling.temperature, "top_k": sampling.top_k, "top_p": sampling.top_p,
            "min_p": sampling.min_p, "typical_p": sampling.typical_p, "min_keep": sampling.min_keep,
            "xtc_probability": sampling.xtc_probability, "xtc_threshold": sampling.xtc_threshold,
            "top_n_sigma": sampling.top_n_sigma, "dynatemp_range": sampling.dynatemp_range,
            "dynatemp_exponent": sampling.dynatemp_exponent,
            "repeat_last_n": sampling.repetition_window or -1, "repeat_penalty": sampling.repetition_penalty,
            "presence_penalty": sampling.presence_penalty, "frequency_penalty": sampling.frequency_penalty,
            "stop": list(stop), "ignore_eos": ignore_eos, "stream": stream,
            "samplers": DEFAULT_SAMPLERS if sampling.sampler_names is None else list(sampling.sampler_names),
            "dry_multiplier": sampling.dry_multiplier, "dry_base": sampling.dry_base,
            "dry_allowed_length": sampling.dry_allowed_length, "dry_penalty_last_n": sampling.dry_penalty_last_n,
            "dry_sequence_breakers": list(sampling.dry_sequence_breakers), "mirostat": sampling.mirostat,
            "mirostat_tau": sampling.mirostat_tau, "mirostat_eta": sampling.mirostat_eta,
            "logit_bias": [{"bias": bias, "token": token} for token, bias in sampling.logit_bias.items()],
            "n_probs": n_probs, "reasoning_in_content": False, "thinking_forced_open": False,
            "timings_per_token": timings_per_token,
            "post_sampling_probs": sampling.post_sampling, "backend_sampling": False, "lora": []}


# llama.cpp's enum llama_vocab_type: 2 is LLAMA_VOCAB_TYPE_BPE, the byte-level BPE of the Qwen tokenizers.
_VOCAB_TYPE_BPE = 2


def model_meta(card: ModelCard) -> dict:
    """llama-server's `meta` of a /v1/models entry (server-context model_meta / engine_model_info): the vocabulary,
    one slot's context (n_ctx, the served window), the context the checkpoint was trained for (n_ctx_train, its
    max_position_embeddings), the hidden size, the parameter count and the weights' bytes."""
    text = card.config.get("text_config")
    trained = (text if isinstance(text, dict) else {}).get("max_position_embeddings",
                                                            card.config.get("max_position_embeddings"))
    if not isinstance(trained, int) or isinstance(trained, bool) or trained <= 0:
        trained = card.max_context_len
    return {"vocab_type": _VOCAB_TYPE_BPE, "n_vocab": card.tokenizer_vocab_size, "n_ctx": card.max_context_len,
            "n_ctx_train": trained, "n_embd": embedding_length(card), "n_params": card.num_parameters,
            "size": model_size(card)}


# llama.cpp's media marker (mtmd_default_marker), which a multimodal /completion prompt puts where each image or audio
# clip goes; GET /props states it as get_media_marker() gives it. The model here takes no media (modalities says so).
MEDIA_MARKER = "<__media__>"


def model_ftype(card: ModelCard) -> str:
    """GET /props' model_ftype: the weights' type as llama.cpp names a GGUF's (llama_model_ftype_name: "BF16", "F16",
    "Q8_0"), here the checkpoint's quantization label in capitals ("BF16", "FP8"); "unknown" when none is known."""
    return (card.quantization or "unknown").upper()


def models_entry(card: ModelCard, served_name: str) -> dict:
    """llama-server's Ollama-shaped entry of its model list's `models` array (server-context engine_models), which it
    answers beside `data` on /models and /v1/models: its empty strings where it has no value (modified_at, size,
    digest), and the model's details."""
    return {"name": served_name, "model": served_name, "modified_at": "", "size": "", "digest": "", "type": "model",
            "description": "", "tags": [""], "capabilities": ["completion"], "parameters": "",
            "details": model_details(card)}


def stop_type(finish_reason: Optional[str], stop_reason) -> str:
    """llama.cpp's stop_type: word (a stop string matched), eos (an end token), limit (n_predict or the context)."""
    if finish_reason == "stop":
        return "word" if isinstance(stop_reason, str) else "eos"
    return "limit" if finish_reason == "length" else "none"


def response_fields(body: dict) -> Optional[list]:
    """llama.cpp's response_fields as sent (None: all), checked to be a list of field names."""
    fields = body.get("response_fields")
    if fields is not None and not (isinstance(fields, list) and all(isinstance(f, str) for f in fields)):
        raise InvalidRequest("response_fields must be a list of field names (a nested one as 'a/b')",
                             param="response_fields")
    return fields


def nested_fields(body: dict, paths: list) -> dict:
    """llama.cpp's response_fields: only the fields named, a nested one ("generation_settings/n_predict") under its
    whole path as the key; a path that names nothing is left out."""
    out = {}
    for path in paths:
        value, found = body, True
        for key in path.split("/"):
            found = found and isinstance(value, dict) and key in value
            value = value[key] if found else None
        if found:
            out[path] = value
    return out


class LlamaCppShaper:
    """One /completion request's bodies: a partial per piece of text and a final per prompt."""

    def __init__(self, plan, card, requested: int, gen=None, fields: Optional[list] = None,
                 timings_per_token: bool = False, return_progress: bool = False):
        self.plan, self.card, self.gen, self.fields = plan, card, gen, fields
        self.timings_per_token, self.return_progress = timings_per_token, return_progress
        self.received = gen.started_at if gen is not None else time.monotonic()
        self.settings = {"n_ctx": card.max_context_len,
                         **params_json(plan.gen.sampling, requested, plan.gen.stop, plan.gen.ignore_eos, plan.stream,
                                       plan.gen.num_logprobs or 0, timings_per_token)}

    def _prompt(self, index: int, usage: Usage) -> tuple[list, int]:
        """The prompt ids of choice `index` (n choices per prompt) and how many of them the prefix cache held."""
        prompt = index // self.plan.gen.n
        cached = usage.per_prompt[prompt][1] if len(usage.per_prompt) > prompt else usage.cached_tokens
        return self.plan.gen.all_prompt_ids[prompt], cached

    def probabilities(self, entries: list) -> list:
        """llama.cpp's completion_probabilities: each token's id, text, logprob, bytes and its top_logprobs; with
        post_sampling_probs, its id, text, bytes, prob and top_probs, the probabilities after the sampler chain, a token
        the chain filtered out left out (server-task.cpp probs_vector_to_json)."""
        if self.plan.gen.sampling.post_sampling:
            return [post_sampling_entry(self.card, e) for e in entries]

        def one(token_id: int, logprob: float) -> dict:
            return {"id": token_id, "token": self.card.token_text(token_id),
                    "logprob": logprob if math.isfinite(logprob) else -1e30,
                    "bytes": list(self.card.token_bytes(token_id))}
        return [{**one(e.token_id, e.logprob), "top_logprobs": [one(t, lp) for t, lp in e.top]} for e in entries]


    def timings(self, prompt_n: int, cached: int, predicted_n: int) -> dict:
        """llama.cpp's timings object (prompt_n, cache_n, predicted_n and their ms and per-second rates)."""
        return llama_timings(self.gen, self.received, prompt_n, cached, predicted_n)

    def progress(self, usage: Usage) -> list:
        """llama.cpp's return_progress (streamed): a partial with each prompt's prompt_progress before its text
        (server-context.cpp: send_partial_response with is_progress, result_prompt_progress::to_json), here once the
        prompt is read, as the scheduler reports no progress within a prompt."""
        out = []
        for index in range(self.plan.gen.num_choices if self.return_progress else 0):
            prompt_ids, cached = self._prompt(index, usage)
            total, ms = len(prompt_ids), self.timings(len(prompt_ids), cached, 0)["prompt_ms"]
            out.append({"index": index, "content": "", "tokens": [], "stop": False, "id_slot": -1,
                        "tokens_predicted": 0, "tokens_evaluated": total,
                        "prompt_progress": {"total": total, "cache": cached, "processed": total, "time_ms": ms}})
        return out

    def partial(self, delta: Delta, usage: Usage) -> dict:
        """llama.cpp's streamed partial object of a Delta: content, tokens, stop false, counts (and timings with
        timings_per_token)."""
        body = {"index": delta.index, "content": delta.content, "tokens": delta.token_ids, "stop": False,
                "id_slot": -1, "tokens_predicted": delta.num_tokens,
                "tokens_evaluated": len(self._prompt(delta.index, usage)[0])}
        if self.timings_per_token:
            # llama.cpp's timings_per_token: each partial has the timings so far (server-task.cpp
            # to_json_non_oaicompat: "usually for the last response or with timings_per_token enabled").
            prompt_ids, cached = self._prompt(delta.index, usage)
            body["timings"] = self.timings(len(prompt_ids), cached, delta.num_tokens)
        if self.plan.gen.num_logprobs is not None and delta.logprobs:
            body["completion_probabilities"] = self.probabilities(delta.logprobs)
        return body

    def final(self, index: int, content: str, token_ids: list, finish: Optional[str], stop_reason,
              usage: Usage, num_tokens: int, logprobs: Optional[list] = None, has_new_line: bool = False) -> dict:
        """One prompt's final object; has_new_line: a newline was in text already sent (llama.cpp's slot flag is set
        by any text_to_send, streamed or not)."""
        prompt_ids, cached = self._prompt(index, usage)
        reason = stop_type(finish, stop_reason)
        body = {"index": index, "content": content, "tokens": token_ids, "id_slot": -1, "stop": True,
                "model": self.plan.model, "tokens_predicted": num_tokens, "tokens_evaluated": len(prompt_ids),
                "generation_settings": self.settings, "prompt": self.card.decode(prompt_ids, False),
                "has_new_line": has_new_line or "\n" in content,
                # As llama.cpp's: the output ran into the end of the context (never a cut prompt here).
                "truncated": reason == "limit" and len(prompt_ids) + num_tokens >= self.card.max_context_len,
                "stop_type": reason, "stopping_word": stop_reason if reason == "word" else "",
                # llama.cpp's n_tokens_cached: the tokens its slot holds after the answer (slot.prompt.n_tokens()),
                # the prompt and the output but its last token, sampled and never decoded; cache_n has the hits.
                "tokens_cached": len(prompt_ids) + max(num_tokens - 1, 0),
                "timings": self.timings(len(prompt_ids), cached, num_tokens)}
        if logprobs:
            body["completion_probabilities"] = self.probabilities(logprobs)
        return nested_fields(body, self.fields) if self.fields else body

    def response(self, results: list, usage: Usage, return_tokens: bool):
        """The non-streamed answer: one result object, or a list of them for several prompts (as llama.cpp)."""
        bodies = [self.final(r.index, r.content, r.token_ids if return_tokens else [], r.finish_reason,
                             r.stop_reason, usage, len(r.token_ids), self._answer_probs(r)) for r in results]
        return bodies[0] if len(bodies) == 1 else bodies

    def _answer_probs(self, result) -> Optional[list]:
        """A whole answer's probabilities without its stop word's: llama.cpp's send_final_response leaves out as many
        entries as the stopping word has tokens, tokenized alone (its PR #2849: the word is not in the content); a
        stream has sent them with its partials already, so only this answer drops them."""
        if self.plan.gen.num_logprobs is None:
            return None
        entries = result.logprobs or []
        if stop_type(result.finish_reason, result.stop_reason) == "word":
            word_ids = self.card.tokenizer.encode(result.stop_reason, add_special_tokens=False).ids
            entries = entries[:len(entries) - min(len(entries), len(word_ids))]
        return entries


class LlamaCppFramer(SseFramer):
    """SSE framing of a /completion stream: a `data:` partial per piece of text, then each prompt's final object
    (stop: true, its content and tokens already sent); no [DONE], as llama.cpp sends none on this route."""
    content_type = "text/event-stream; charset=utf-8"
    headers = SSE_HEADERS

    def __init__(self, shaper: LlamaCppShaper):
        self.shaper = shaper
        self._new_line_indexes: set = set()   # choices whose streamed content held a newline

    def start(self, usage: Usage) -> list[bytes]:
        """llama.cpp's prompt-progress objects, when the request asked for them (return_progress)."""
        return [sse_event(body) for body in self.shaper.progress(usage)]

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """The partial object of a Delta with text or ids, and the choice's final object (stop, timings, has_new_line)
        when it finished."""
        frames = []
        if delta.content or delta.token_ids:
            frames.append(sse_event(self.shaper.partial(delta, usage)))
        if "\n" in delta.content:
            self._new_line_indexes.add(delta.index)
        if delta.finish_reason:
            frames.append(sse_event(self.shaper.final(delta.index, "", [], delta.finish_reason, delta.stop_reason,
                                                      usage, delta.num_tokens,
                                                      has_new_line=delta.index in self._new_line_indexes)))
        return frames

    def end(self, usage: Usage) -> list[bytes]:
        """Nothing: llama.cpp ends /completion's stream with the last final object, no [DONE]."""
        return []

    def error(self, error: ApiError, usage: Usage) -> list[bytes]:
        """llama.cpp's error object ({"error": {code, message, type}}) as one event, no [DONE]."""
        return [sse_event(llama_cpp_error(error))]
