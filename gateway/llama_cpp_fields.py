"""Gateway process: llama.cpp server's own request fields on the /v1 routes (its OpenAI-compatible endpoints take every
/completion option, tools/server/server-task.cpp params_from_json_cmpl), read as llama.cpp reads them."""
from __future__ import annotations

from typing import Any, Callable, Optional

from gateway.dry_sampling import SCHEMA as DRY_SCHEMA
from gateway.errors import InvalidRequest, Unsupported
from gateway.list_limits import MAX_N
from gateway.pydantic_scalars import lax_scalars
from gateway.schema_validate import integral

# Their types, merged into the /v1 request schemas (a wrong type is a 400 naming the field).
SCHEMA = {
    # The output limit; -1 is none (up to the context), as llama.cpp's default, and -2 (llama.cpp's "until the context
    # is filled") the same, since the output here stops where the context is full and never shifts it.
    "n_predict": {"type": ["integer", "null"]},
    # The number of completions (OpenAI's n, which it wins over); fold_n_cmpl reads it.
    "n_cmpl": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_N},
    # The N most likely tokens' probabilities of each output token: the answer's logprobs, with N alternatives (0 is
    # none), where the request has no OpenAI logprobs (which win, as in llama.cpp); past the 20 served, 20, as
    # llama-server gives min(n_vocab, n_probs) (server-context.cpp populate_token_probs), never a 400.
    "n_probs": {"type": ["integer", "null"], "minimum": 0},
    # Constrained output (gateway.openai_fields reads them with vLLM's guided_json / guided_grammar): a JSON schema
    # (object or JSON text), and a grammar, which llama.cpp writes in GBNF (converted to Lark, as guided_grammar's).
    "json_schema": {"type": ["object", "string", "null"]},
    "grammar": {"type": ["string", "null"]},
    # top_p, min_p and typical_p keep at least this many tokens (llama.cpp's min_keep; 0 or less as 1).
    "min_keep": {"type": ["integer", "null"]},
    # The order of llama.cpp's sampler chain: a list of names, or one character per sampler (llama_cpp_samplers).
    "samplers": {"type": ["array", "string", "null"]},
    # The repetition penalty's window: the last N prompt+output tokens, -1 all of them, 0 no penalty.
    "repeat_last_n": {"type": ["integer", "null"], "minimum": -1},
    # XTC (exclude top choices), run as llama.cpp runs it (worker/sampling_chain.py xtc); off at probability 0 or a
    # threshold above 0.5.
    "xtc_probability": {"type": ["number", "null"]},
    "xtc_threshold": {"type": ["number", "null"]},
    # DRY, top-n-sigma (at or below 0 off, its -1 default) and dynamic temperature (range 0 off), run as llama.cpp
    # runs them (gateway/dry_sampling.py, worker/dry.py, worker/sampling_chain.py).
    **DRY_SCHEMA,
    "top_n_sigma": {"type": ["number", "null"]},
    "dynatemp_range": {"type": ["number", "null"]},
    "dynatemp_exponent": {"type": ["number", "null"]},
    # Mirostat's target surprise and learning rate (llama.cpp's and llama-cpp-python's names; `mirostat` is typed
    # with the /v1 schema's fields).
    "mirostat_tau": {"type": ["number", "null"]},
    "mirostat_eta": {"type": ["number", "null"]},
    # Its adaptive-p sampler (common/sampling.cpp): the last of the chain when `samplers` names adaptive_p, off at a
    # negative target (-1, its default); llama_cpp_samplers refuses it on.
    "adaptive_target": {"type": ["number", "null"]},
    "adaptive_decay": {"type": ["number", "null"]},
    # Probabilities after llama.cpp's sampler chain ("prob" / "top_probs"): check_post_sampling refuses them.
    "post_sampling_probs": {"type": ["boolean", "null"]},
    # LoRA adapters by id and scale ([{"id", "scale"}]); none is loaded here, so any entry is REFUSED below.
    "lora": {"type": ["array", "null"]},
    # How a chat answer's <think> block comes back (common_reasoning_format_from_name's names): thinking_in_content.
    "reasoning_format": {"enum": ["none", "auto", "deepseek", "deepseek-legacy", None]},
    # The reasoning's token budget (tools/server/server-common.cpp reads reasoning_budget_tokens, then its older name
    # thinking_budget_tokens; -1 unrestricted, 0 ends the thinking at once): gateway.thinking_budget enforces it.
    "reasoning_budget_tokens": {"type": ["integer", "null"], "minimum": -1, "maximum": 2**31 - 1},
    "thinking_budget_tokens": {"type": ["integer", "null"], "minimum": -1, "maximum": 2**31 - 1},
    # The generation's time limit in ms (0 or less: none), checked at each newline: max_predict_s reads it. llama.cpp
    # keeps it in an int64_t; past that ("9" * 400 sent as a string) it overflowed the division: a 500.
    "t_max_predict_ms": {"type": ["integer", "null"], "minimum": -2**63, "maximum": 2**63 - 1},
    # The least indentation of a generated line after the first (0: none): gateway.indent_limit applies it.
    "n_indent": {"type": ["integer", "null"]},
    # Seconds between keep-alive comments on a silent stream for this request (0 or less: none): sse_pings reads it.
    "sse_ping_interval": {"type": ["number", "null"]},
}


# field -> (is the request asking for it?, why it is refused): what llama.cpp would do that changes the output here.
REFUSED: dict[str, tuple[Callable[[Any], bool], str]] = {
    # llama.cpp refuses an adapter id it did not load ("invalid adapter id"); this server loads none.
    "lora": (lambda v: bool(v), "invalid adapter id: this server loads no LoRA adapters (GET /lora-adapters lists "
                                "none)"),
    # llama.cpp applies a lazy grammar only from the first grammar_triggers match on (common/sampling.cpp
    # llama_sampler_init_grammar_lazy_patterns), and refuses one without triggers; applied from the first token it
    # would force every answer into the grammar.
    "grammar_lazy": (lambda v: v is True, "a lazy grammar (applied only once a grammar_triggers word or pattern "
                                          "appears) is not supported; send the grammar without grammar_lazy to "
                                          "constrain the whole output"),
}


# /completion's sampling values llama.cpp clamps into range rather than refusing (tools/server/server-schema.cpp:
# field_num set_limits, max(min, min(max, v))): top_k -5 is 0 (off), top_p 1.5 is 1, a negative temperature 0
# (greedy). typical_p has no limits there, but 1 and above are off and 0 and below keep one token, as here.
_CLAMPED = {"top_k": (0, None), "top_p": (0.0, 1.0), "min_p": (0.0, 1.0), "temperature": (0.0, None),
            "typical_p": (0.0, 1.0)}


# /v1's temperature bound (OpenAI's); llama.cpp sets none, so /completion passes a higher one by llama_cpp_chain.
V1_MAX_TEMPERATURE = 2.0


def clamp_sampling(body: dict) -> dict:
    """body with /completion's sampling numbers clamped into llama.cpp's ranges (_CLAMPED), a temperature above
    /v1's bound at that bound (llama_cpp_chain sets the one sent)."""
    out = dict(body)
    for name, (low, high) in _CLAMPED.items():
        value = out.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = max(low, value) if high is None else min(max(low, value), high)
    if isinstance(out.get("temperature"), float | int) and out["temperature"] > V1_MAX_TEMPERATURE:
        out["temperature"] = V1_MAX_TEMPERATURE
    return out


# The top_p sent for a top_p of 0 (LM Studio's /api/v1 and /api/v0, llama.cpp's): LM Studio's docs take [0, 1], and
# llama.cpp's sampler keeps the most likely token at 0, as this one does for any top_p below 1e-9 (the OpenAI parser,
# as vLLM, takes (0, 1]).
_LEAST_TOP_P = 1e-9


def zero_top_p(body: dict) -> dict:
    """body with a top_p of 0 (LM Studio's, llama.cpp's) sent as the least top_p (the most likely token), for the
    OpenAI parser."""
    top_p = body.get("top_p")
    if isinstance(top_p, (int, float)) and not isinstance(top_p, bool) and top_p == 0:
        return {**body, "top_p": _LEAST_TOP_P}
    return body


def max_predict_s(body: dict) -> Optional[float]:
    """llama.cpp's t_max_predict_ms in seconds, None when off (absent, 0 or less). As its server reads it
    (tools/server/server-context.cpp process_token): once the time since the first generated token is past it, the
    output stops after the next piece of text holding a newline (that piece kept), with stop_type "limit"."""
    value = body.get("t_max_predict_ms")
    return value / 1000 if value is not None and value > 0 else None


# The shortest keep-alive period a request may ask for (sse_ping_interval), in seconds.
MIN_SSE_PING_S = 0.1


def sse_pings(body, server_s: float) -> tuple[float, bool]:
    """(keep-alive period, whether keep-alives are sent) of a streamed request: llama.cpp's sse_ping_interval, "interval
    in seconds between SSE comment pings emitted while the stream stays silent ... Overrides the server
    --sse-ping-interval setting for this request, -1 disables pings" (tools/server/README.md, /completion options);
    0 or less sends none; absent or null, the server's period (SPARKINFER_SSE_KEEPALIVE_SECONDS). A period under
    MIN_SSE_PING_S is served at it: 1e-6 had the gateway write ~650 pings a second on that stream (0.14 CPU s a second
    of the event loop every stream shares), a client's lever on everyone's latency."""
    # Read as the request's schema read it ("5" is 5, pydantic's lax mode); the body was validated before.
    value = lax_scalars(body.get("sse_ping_interval"), SCHEMA["sse_ping_interval"]) if isinstance(body, dict) else None
    if not isinstance(value, int | float):
        return server_s, True
    return (max(float(value), MIN_SSE_PING_S), True) if value > 0 else (server_s, False)


def min_indent(body) -> int:
    """llama.cpp's n_indent (its /completion and /infill option, json_value of an int, default 0) as read here: the
    least indentation of a generated line after the first; 0 or less, or absent: none."""
    value = integral(lax_scalars(body.get("n_indent"), SCHEMA["n_indent"]), SCHEMA["n_indent"]) \
        if isinstance(body, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def fold_n_cmpl(body):
    """body with llama.cpp's n_cmpl (its number of completions, whose fallback alias is OpenAI's n) as n: n_cmpl wins
    where both are sent, as llama.cpp reads them (tools/server: field n_cmpl, add_alias("n"))."""
    if not isinstance(body, dict) or body.get("n_cmpl") is None:
        return body
    value = body["n_cmpl"]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_N:
        raise InvalidRequest(f"n_cmpl must be an integer from 1 to {MAX_N}, got {value!r}", param="n_cmpl")
    return {**body, "n": value}


def check_post_sampling(body) -> None:
    """400 for llama.cpp's post_sampling_probs with probabilities asked for: they would be the survivors of its
    sampler chain, renormalized, under other keys (prob, top_probs); the ones here are the raw distribution's logprobs,
    and answering those under the keys the client did not ask for misled it (its top_probs read as empty)."""
    if not isinstance(body, dict) or body.get("post_sampling_probs") is not True:
        return
    if body.get("n_probs") or body.get("logprobs") or body.get("top_logprobs"):
        raise Unsupported("post_sampling_probs: probabilities after the sampler chain are not supported; n_probs and "
                          "logprobs here are the model's raw distribution (send post_sampling_probs false or leave "
                          "it out)", param="post_sampling_probs")


def content_ids(card, content, parse_special) -> list:
    """llama.cpp's /tokenize content: a string, or a list mixing strings and token ids (its tokenize_mixed: each string
    tokenized, each id kept as it is). parse_special false reads special-token text (<|im_end|>) as the characters it
    is, as llama.cpp's common_tokenize does then; true or absent (llama.cpp's default) as the token."""
    parts = content if isinstance(content, list) else [content]
    bad = [part for part in parts if isinstance(part, int) and part >= card.tokenizer_vocab_size]
    if bad:
        raise InvalidRequest(f"content: token id {bad[0]} is not in [0, {card.tokenizer_vocab_size})", param="content")
    ids: list = []
    for part in parts:
        if isinstance(part, int):
            ids.append(part)
        else:
            ids += card.encode(part) if parse_special is not False else card.encode_literal(part)
    return ids


def bias_value(value) -> float:
    """A logit_bias value: a number, or llama.cpp's false (the token never sampled: OpenAI's -100, a ban). One past
    +-100 is served at it, as vLLM's SamplingParams.from_optional clamps it ("per OpenAI API spec") and llama.cpp's
    params_from_json_cmpl adds any bias: past 100 a token is as forced, or as banned, as at it. Only OpenAI's own API
    refuses it, and /v1 answered its 400 ('greater than the maximum of 100') to what both reference servers serve."""
    if value is True:
        raise InvalidRequest("logit_bias: a bias is a number, or false to ban the token (true means nothing)",
                             param="logit_bias")
    return -100.0 if value is False else min(100.0, max(-100.0, float(value)))


# llama.cpp's LLAMA_DEFAULT_SEED: the seed it states for "random".
RANDOM_SEED = 0xFFFFFFFF


def llama_server_seed(value: Optional[int]) -> Optional[int]:
    """The seed llama-server samples with (None: a random one): it reads `seed` into a uint32 (json_value, so -1 is
    0xFFFFFFFF and 2^32 + 5 is 5), and LLAMA_DEFAULT_SEED draws a fresh random seed for each request
    (src/llama-sampling.cpp get_rng_seed). Ollama hands its options.seed to llama-server as it is."""
    if value is None:
        return None
    value %= 1 << 32
    return None if value == RANDOM_SEED else value


def bias_pairs(pairs: list, card) -> dict:
    """llama.cpp's logit_bias list (params_from_json_cmpl): [token id, bias] pairs, or [text, bias] biasing each token
    of the text (tokenized as common_tokenize does, special-token text as plain text)."""
    bias = {}
    for key, value in pairs:
        # JSON Schema's integer takes 5.0 (and 1e308) too: it is the token id it reads as, never a text to tokenize.
        if isinstance(key, float):
            key = int(key)
        if isinstance(key, int) and key >= card.vocab_size:
            raise InvalidRequest(f"logit_bias token id {key} is not in [0, {card.vocab_size})", param="logit_bias")
        for token_id in [key] if isinstance(key, int) else card.encode_literal(key):
            bias[token_id] = bias_value(value)
    return bias


def with_pieces(card, token_ids: list) -> list:
    """llama.cpp's /tokenize with_pieces: [{"id", "piece"}], the piece each id's text, or its bytes as a list of
    integers where they are not whole UTF-8 (a byte of a longer character)."""
    out = []
    for token_id in token_ids:
        raw = card.token_bytes(token_id)
        try:
            piece = raw.decode("utf-8")
        except UnicodeDecodeError:
            piece = list(raw)
        out.append({"id": token_id, "piece": piece})
    return out


def apply_repeat_last_n(body: dict, sampling, context: int) -> None:
    """llama.cpp's repeat_last_n on `sampling`'s repetition penalty (repeat_penalty / repetition_penalty): it looks
    back over the last N prompt+output tokens (llama.cpp's penalty_last_n), -1 or a window at or past the context
    over all of them, and 0 turns it off. Absent, the penalty covers all of them, as vLLM's does."""
    window = body.get("repeat_last_n")
    if window is None:
        return
    if window == 0:
        sampling.repetition_penalty = 1.0
        return
    sampling.repetition_window = window if 0 < window < context else 0


def thinking_in_content(body: dict, stream: bool) -> bool:
    """llama.cpp's reasoning_format on chat: "none" leaves the thinking in `content` as the model wrote it, its tags
    included, and so does "deepseek-legacy" in a stream (llama.cpp's reasoning_in_content); "auto", "deepseek" or
    none sent split it into reasoning_content (as without the field)."""
    fmt = body.get("reasoning_format")
    return fmt == "none" or (fmt == "deepseek-legacy" and stream)


def reasoning_beside_content(body: dict, stream: bool) -> bool:
    """llama.cpp's "deepseek-legacy" answer not streamed: the thinking in reasoning_content, and in `content` too."""
    return body.get("reasoning_format") == "deepseek-legacy" and not stream
