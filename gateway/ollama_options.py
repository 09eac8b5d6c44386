"""Gateway process: Ollama `options` (and `think`) -> internal sampling knobs, generation budget and context window."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Optional

from gateway import json_out
from gateway.effort_tiers import nearest_tier
from gateway.engine import Sampling
from gateway.errors import ContextLengthExceeded, InvalidRequest
from gateway.list_limits import MAX_STOPS
from gateway.llama_cpp_fields import llama_server_seed
from gateway.model import ModelCard
from gateway.once_log import MAX_SHOWN, short_name

log = logging.getLogger("sparkinfer.gateway")
# Ollama's api.Options (api/types.go), the only options it reads; any other key is logged and ignored whatever its
# value, as its Options.FromMap does ("invalid option provided"): mirostat, mirostat_eta, mirostat_tau, tfs_z,
# penalize_newline, numa, low_vram, f16_kv, use_mlock, ... are options it dropped and ignores.
# Load-time and resource options: typed as Ollama types them, then ignored (they place the model, never change what
# it writes); num_keep is one too here (no context shift: a prompt past the window is refused).
_INT_RESOURCE_OPTIONS = frozenset({"num_batch", "num_gpu", "main_gpu", "num_thread", "num_keep", "draft_num_predict"})
_BOOL_RESOURCE_OPTIONS = frozenset({"use_mmap"})
# (low, high) inclusive; None = unbounded. Past a bound Ollama's sampler clamps (_CLAMPS) the server's own limits
# remain: the wire's temperature range and vLLM's penalties.
_FLOAT_RANGES = {"temperature": (0.0, 100.0), "top_p": (0.0, 1.0), "min_p": (0.0, 1.0),
                 "repeat_penalty": (0.0, 100.0), "presence_penalty": (-2.0, 2.0),
                 "frequency_penalty": (-2.0, 2.0), "typical_p": (0.0, 1.0)}
# Values Ollama's sampler holds in range instead of refusing (sample/samplers.go NewSampler): a negative temperature
# is 0 (greedy), top_p and min_p stay in [0, 1] (typical_p, which it no longer reads, too); a repeat_penalty of 0 or
# less is 1 (off), below.
_CLAMPS = {"temperature": (0.0, None), "top_p": (0.0, 1.0), "min_p": (0.0, 1.0), "typical_p": (0.0, 1.0)}
_INT_OPTIONS = ("top_k", "seed", "num_predict", "num_ctx", "repeat_last_n")
_KNOWN = frozenset(_FLOAT_RANGES) | frozenset(_INT_OPTIONS) | _INT_RESOURCE_OPTIONS | _BOOL_RESOURCE_OPTIONS | {"stop"}
# Ollama stores every integer option in a Go int (64 bits), converted from the float64 the number decoded to.
_GO_INT_MIN, _GO_INT_MAX = -(1 << 63), (1 << 63) - 1
# Ollama's levels, and "xhigh", the tier /api/show lists for a template that has it (Ollama's Qwen3.8 metadata).
_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}
# The least top_p the wire carries (gateway.generation sends it for anything smaller): only the most likely token.
_LEAST_TOP_P = 1e-9
# Ollama's repeat_last_n when a request leaves it out (api.DefaultOptions).
_DEFAULT_REPEAT_LAST_N = 64


@dataclass
class OllamaOptions:
    """What an Ollama `options` map asks for, resolved against the model."""
    sampling: Sampling
    num_ctx: int                          # context window for this request (<= the model's)
    num_predict: Optional[int] = None     # None: generate until the window is full
    stop: list = field(default_factory=list)


def _number(name: str, value: Any, integer: bool) -> Any:
    """The option's value as Ollama's Options.FromMap reads it: any JSON number, else a 400 in its words. An integer
    option is Go's int64(f) of the float64 encoding/json decoded it to (the request's options are a map[string]any,
    never decoded into the Options struct): truncated toward zero, rounded as a float64 past 2^53, and held at the
    int64 bounds past them, as arm64 converts (amd64 gives the lower bound for either side). So ComfyUI's seeds, up
    to 2^64 - 1, are served, as Ollama serves them."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "integer" if integer else "float32"
        raise InvalidRequest(f'option "{name}" must be of type {kind}', param=f"options.{name}")
    if not integer:
        return value
    try:
        number = float(value)
    except OverflowError:
        # An integer literal past float64's range: strconv.ParseFloat refuses it, as encoding/json then words it.
        raise InvalidRequest(f"json: cannot unmarshal number {value} into Go value of type float64",
                             param=f"options.{name}") from None
    if number >= 2.0**63:
        return _GO_INT_MAX
    return _GO_INT_MIN if number < -2.0**63 else int(number)


def _clamped(name: str, value: float) -> float:
    """The value as Ollama's sampler reads it (_CLAMPS; repeat_penalty <= 0 is 1)."""
    if name == "repeat_penalty":
        return 1.0 if value <= 0 else value
    low, high = _CLAMPS.get(name, (None, None))
    if low is not None and value < low:
        return low
    return high if high is not None and value > high else value


def _check_range(name: str, value: float) -> None:
    low, high = _FLOAT_RANGES[name]
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise InvalidRequest(f"option {name!r} must be in {bound}, got {value}", param=f"options.{name}")


def _typed(options: dict) -> dict:
    """Options with checked types and ranges; a key Ollama does not have is ignored (logged), as Ollama does."""
    out = {}
    unknown = [name for name in options if name not in _KNOWN]
    # Like Ollama: an unknown option is logged and ignored (clients send extras), never a 400; past MAX_SHOWN names
    # one line counts the rest (options with 100000 unknown keys wrote 100000 lines).
    for name in unknown[:MAX_SHOWN]:
        log.warning("ignoring unknown Ollama option %s", short_name(name))
    if len(unknown) > MAX_SHOWN:
        log.warning("ignoring %d more unknown Ollama options", len(unknown) - MAX_SHOWN)
    for name, value in options.items():
        if name not in _KNOWN:
            continue
        if value is None:
            continue
        if name in _BOOL_RESOURCE_OPTIONS and not isinstance(value, bool):
            raise InvalidRequest(f'option "{name}" must be of type boolean', param=f"options.{name}")
        if name in _INT_RESOURCE_OPTIONS:
            _number(name, value, True)
        if name in _INT_RESOURCE_OPTIONS or name in _BOOL_RESOURCE_OPTIONS:
            continue
        if name == "stop":
            out[name] = _stop_list(value)
            continue
        out[name] = _number(name, value, name in _INT_OPTIONS)
        if name in _FLOAT_RANGES:
            out[name] = _clamped(name, out[name])
            _check_range(name, out[name])
    return out


def _stop_list(value: Any) -> list:
    # Ollama's Options.FromMap words (api/types.go): Stop is a []string, so a lone string is not an array.
    if not isinstance(value, list):
        raise InvalidRequest('option "stop" must be of type array', param="options.stop")
    if not all(isinstance(s, str) for s in value):
        raise InvalidRequest('option "stop" must be of an array of strings', param="options.stop")
    if len(value) > MAX_STOPS:
        raise InvalidRequest(f"option 'stop' holds at most {MAX_STOPS} strings", param="options.stop")
    return [s for s in value if s]


def _repetition(opts: dict, pick, context: int) -> tuple[float, int]:
    """(repeat_penalty, the tokens it looks back over; 0 = all) as Ollama reads repeat_last_n: 64 when unset, 0
    disables the penalty, -1 (any negative) is the whole context, and so is a window at or past the context (any
    Go int is taken; past 2^31 - 1 it fit no int32 on the wire: a 500)."""
    penalty = float(opts.get("repeat_penalty", pick("repetition_penalty", 1.0)))
    window = opts.get("repeat_last_n", _DEFAULT_REPEAT_LAST_N)
    if window == 0:
        return 1.0, 0
    return penalty, window if 0 < window < context else 0


def _sampling(opts: dict, card: ModelCard) -> Sampling:
    defaults = card.generation_defaults

    def pick(name: str, fallback):
        return opts[name] if opts.get(name) is not None else defaults.get(name, fallback)

    seed = opts.get("seed")
    top_k = int(pick("top_k", 0))
    # top_k at or past the vocabulary keeps every token: the same as off (and a huge value fits no int32).
    top_k = 0 if top_k < 0 or top_k >= card.vocab_size else top_k
    repetition_penalty, repetition_window = _repetition(opts, pick, card.max_context_len)
    off = opts.get("repeat_last_n") == 0
    # top_p 0 keeps the most likely token, as llama.cpp's top_p sampler (Ollama's) reads it; 0 on the wire is "off".
    top_p = float(pick("top_p", 1.0)) or _LEAST_TOP_P
    return Sampling(temperature=float(pick("temperature", 1.0)), top_p=top_p,
                    top_k=top_k, min_p=float(pick("min_p", 0.0)), typical_p=float(opts.get("typical_p", 1.0)),
                    # As Ollama's llama-server reads it: a uint32, whose 0xFFFFFFFF (Ollama's -1) is random.
                    seed=llama_server_seed(seed),
                    # repeat_last_n 0 turns every penalty off, as llama.cpp's penalties sampler (Ollama's) returns then.
                    presence_penalty=0.0 if off else float(opts.get("presence_penalty", 0.0)),
                    frequency_penalty=0.0 if off else float(opts.get("frequency_penalty", 0.0)),
                    repetition_penalty=repetition_penalty, repetition_window=repetition_window, chain="ollama")


def _num_predict(value: Optional[int]) -> Optional[int]:
    """The token limit; None (until the context window is full) for any value below 1, as Ollama's runner reads
    it: only numPredict > 0 limits a sequence (-1 is documented as infinite, -2 as "fill the context")."""
    if value is None or value < 1:
        return None
    return value


_MIN_NUM_CTX = 4


def _num_ctx(value: Optional[int], card: ModelCard) -> int:
    # 0 is the default window. Ollama's scheduler raises any num_ctx under 4 to 4 (server/sched.go getRunner), so a
    # request's 0 is a 4-token window there that cuts the prompt: not what a client sending 0 means.
    if value is None or value == 0:
        return card.max_context_len
    if value < 1:
        raise InvalidRequest(f"option 'num_ctx' must be a positive integer, got {value}", param="options.num_ctx")
    if value < _MIN_NUM_CTX:
        # Ollama's scheduler raises 1-3 to a 4-token window (server/sched.go getRunner: NumCtx < 4 -> 4).
        value = _MIN_NUM_CTX
    if value > card.max_context_len:
        # As Ollama's runner does ("requested context size too large for model"): clients send their own default
        # (Open WebUI, LangChain, OLLAMA_CONTEXT_LENGTH-sized values); the window is the model's.
        log.warning("option num_ctx=%d exceeds the model's context length; using %d", value, card.max_context_len)
        return card.max_context_len
    return value


def parse_options(options: Any, card: ModelCard) -> OllamaOptions:
    """Validates an Ollama options map (None allowed) into sampling, window, budget and stop strings."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise InvalidRequest("'options' must be an object", param="options")
    opts = _typed(options)
    return OllamaOptions(sampling=_sampling(opts, card), num_ctx=_num_ctx(opts.get("num_ctx"), card),
                         num_predict=_num_predict(opts.get("num_predict")), stop=opts.get("stop", []))


def generation_budget(num_prompt: int, options: OllamaOptions) -> int:
    """max_tokens for the engine; 400 when the prompt does not fit the window (prompts are never truncated)."""
    ctx = options.num_ctx
    if num_prompt >= ctx:
        raise ContextLengthExceeded(
            f"the prompt is {num_prompt} tokens, which exceeds the context window of {ctx} tokens; it was not "
            f"truncated. Shorten the prompt or raise options.num_ctx", param="options.num_ctx")
    room = ctx - num_prompt
    return room if options.num_predict is None else min(options.num_predict, room)


def thinking_kwargs(think: Any) -> dict:
    """Chat-template switches for Ollama's `think` (absent: the model's default, thinking on)."""
    if think is None or think is True:
        return {"enable_thinking": True}
    if think is False:
        return {"enable_thinking": False}
    if isinstance(think, str) and think in _EFFORTS:
        return {"enable_thinking": True, "reasoning_effort": _EFFORTS[think]}
    # Ollama's ThinkValue.UnmarshalJSON words.
    if isinstance(think, str):
        raise InvalidRequest(f'invalid think value: {json_out.dumps(think).decode()} (must be "high", "medium", "low", '
                             f'"max", true, or false)', param="think")
    raise InvalidRequest('think must be a boolean or string ("high", "medium", "low", "max", true, or false)',
                         param="think")


def template_thinking(think: Any, card: ModelCard) -> dict:
    """thinking_kwargs with a level as the chat template's nearest effort tier (Ollama's Qwen3.8 renderer sends
    "high" and "max" as xhigh: that template has xhigh, medium and low)."""
    kwargs = thinking_kwargs(think)
    if "reasoning_effort" in kwargs:
        kwargs["reasoning_effort"] = nearest_tier(card, kwargs["reasoning_effort"])
    return kwargs
