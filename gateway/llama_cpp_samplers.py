"""Gateway process: /completion's sampling as llama-server runs it: its `samplers` request field (the order of its
sampler chain, read as tools/server/server-task.cpp params_from_json_cmpl reads it: a list of names, or a string of
one character per sampler; common/sampling.cpp common_sampler_types_from_names / _from_chars), its defaults and its
penalty window (llama_cpp_chain)."""
from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest, Unsupported
from gateway.llama_cpp_clients import high_temperature
from gateway.llama_cpp_fields import apply_repeat_last_n
from gateway.repetition_stop import refuse_repetition_stop

# llama-server's default order (common/common.h common_params_sampling::samplers), as /props and
# generation_settings state it (common_sampler_type_to_str names).
DEFAULT_SAMPLERS = ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"]
_CANONICAL = ["dry", "top_k", "top_p", "top_n_sigma", "typ_p", "min_p", "temperature", "xtc", "infill", "penalties",
              "adaptive_p"]
# Its names, case-insensitive: the canonical ones, their kebab-case and underscore-free forms, and three aliases.
_NAMES = {**{name.replace("_", "-"): name for name in _CANONICAL},
          **{name.replace("_", ""): name for name in _CANONICAL},
          "nucleus": "top_p", "temp": "temperature", "typ": "typ_p", **{name: name for name in _CANONICAL}}
_CHARS = {"d": "dry", "k": "top_k", "y": "typ_p", "p": "top_p", "s": "top_n_sigma", "m": "min_p", "t": "temperature",
          "x": "xtc", "i": "infill", "e": "penalties", "a": "adaptive_p"}
# The samplers that filter here (worker/sampling_chain.py; dry edits the logits before them, worker/dry.py); the others
# are off (adaptive_p when its target is set is refused: apply_samplers) or do nothing for a plain generation (infill,
# adaptive_p at a negative target).
FILTERS = ("temperature", "top_k", "top_p", "min_p", "typ_p", "xtc", "top_n_sigma")


def sampler_names(value: Any) -> list:
    """The canonical names a `samplers` value lists, in order; a name or character llama.cpp does not know is
    skipped, as it skips one (with a warning)."""
    if isinstance(value, str):
        return [_CHARS[c] for c in value if c in _CHARS]
    if not all(isinstance(name, str) for name in value):
        raise InvalidRequest("samplers: each sampler is named by a string", param="samplers")
    return [_NAMES[name.lower()] for name in value if name.lower() in _NAMES]


def apply_samplers(body: dict, sampling) -> None:
    """A request's `samplers` on `sampling`: its filters run in that order (Sampling.filter_order), those left out do
    not run; without "penalties" the repetition, frequency and presence penalties do not apply, and without
    "temperature" none is applied (llama.cpp then draws from the filtered distribution as it is, even at
    temperature 0)."""
    value = body.get("samplers")
    if value is None:
        return
    names = sampler_names(value)
    target = body.get("adaptive_target")
    if "adaptive_p" in names and isinstance(target, int | float) and target >= 0:
        # llama.cpp then draws with adaptive-p instead of from the distribution (common/sampling.cpp: only when
        # `samplers` names it, and a negative target is off), which changes the output: refused, not ignored.
        raise Unsupported("adaptive_target: adaptive-p sampling (adaptive_p in samplers with adaptive_target at or "
                          "above 0) is not supported", param="adaptive_target")
    sampling.sampler_names = names
    sampling.filter_order = [name for name in names if name in FILTERS]
    if "penalties" not in names:
        sampling.repetition_penalty, sampling.presence_penalty, sampling.frequency_penalty = 1.0, 0.0, 0.0
    if "temperature" not in names:
        sampling.temperature = 1.0


# llama-server's sampling defaults (common/common.h common_params_sampling) for a field that neither the request nor
# the checkpoint's generation_config sets (a GGUF's general.sampling.* keys carry those; llama.cpp's own defaults fill
# the rest): min_p 0.05 above all, which a generation_config rarely names.
_LLAMA_CPP_DEFAULTS = {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05}


def llama_cpp_defaults(body: dict, card) -> dict:
    """body with llama-server's default for each sampling field it and the checkpoint leave unset."""
    unset = {name: value for name, value in _LLAMA_CPP_DEFAULTS.items()
             if body.get(name) is None and name not in card.generation_defaults}
    return {**body, **unset}


# llama-server's default penalty window (common/common.h common_params_sampling::penalty_last_n): /completion's.
DEFAULT_REPEAT_LAST_N = 64


def llama_cpp_chain(sampling, body: dict, context: int):
    """/completion's `sampling` (returned) as llama-server's chain runs it (worker/sampling_chain.py): top_k,
    typical_p, top_p and min_p before the temperature, and frequency/presence counted over the penalty window's
    prompt+output tokens; the window (repeat_last_n) is 64 unless sent, and 0 turns all three penalties off, as its
    penalties sampler returns at once then. post_sampling_probs: the probabilities returned are the chain's. vLLM's
    repetition stop, which llama-server has not (no stop_type for it), is refused."""
    refuse_repetition_stop(body)
    sampling.chain = "llama.cpp"
    # n_probs of the distribution each token is drawn from (LlamaCppShaper writes them as prob / top_probs).
    sampling.post_sampling = body.get("post_sampling_probs") is True
    high_temperature(body, sampling)
    window = body.get("repeat_last_n")
    if window is None:
        apply_repeat_last_n({"repeat_last_n": DEFAULT_REPEAT_LAST_N}, sampling, context)
    elif window == 0:
        sampling.presence_penalty = sampling.frequency_penalty = 0.0
    return sampling
