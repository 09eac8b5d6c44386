"""Gateway process: llama.cpp's `samplers` request field (the order of its sampler chain), read as its server reads it
(tools/server/server-task.cpp params_from_json_cmpl: a list of names, or a string of one character per sampler;
common/sampling.cpp common_sampler_types_from_names / _from_chars)."""
from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest

# llama-server's default order (common/common.h common_params_sampling::samplers), as /props and
# generation_settings state it (common_sampler_type_to_str names).
DEFAULT_SAMPLERS = ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"]
_CANONICAL = ["dry", "top_k", "top_p", "top_n_sigma", "typ_p", "min_p", "temperature", "xtc", "infill", "penalties",
              "adaptive_p"]
# Its names, case-insensitive: the canonical ones, their kebab-case and underscore-free forms, and three aliases.
_NAMES = {**{name.replace("_", "-"): name for name in _CANONICAL}, **{name.replace("_", ""): name for name in _CANONICAL},
          "nucleus": "top_p", "temp": "temperature", "typ": "typ_p", **{name: name for name in _CANONICAL}}
_CHARS = {"d": "dry", "k": "top_k", "y": "typ_p", "p": "top_p", "s": "top_n_sigma", "m": "min_p", "t": "temperature",
          "x": "xtc", "i": "infill", "e": "penalties", "a": "adaptive_p"}
# The samplers that filter here (worker/sampling_chain.py); the others are off (dry, xtc and top_n_sigma are refused
# when asked for: llama_cpp_fields.REFUSED) or do nothing for a plain generation (infill, adaptive_p unset).
FILTERS = ("temperature", "top_k", "top_p", "min_p", "typ_p")


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
    sampling.sampler_names = names
    sampling.filter_order = [name for name in names if name in FILTERS]
    if "penalties" not in names:
        sampling.repetition_penalty, sampling.presence_penalty, sampling.frequency_penalty = 1.0, 0.0, 0.0
    if "temperature" not in names:
        sampling.temperature = 1.0
