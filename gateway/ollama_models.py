"""Gateway process: the served model as Ollama describes it (/api/tags, /api/ps, /api/show's details), and Ollama's
time stamps; LM Studio's and llama.cpp's model lists reuse its family, details and size."""
from __future__ import annotations

import hashlib
import re
import time
from datetime import datetime, timedelta, timezone
from typing import Optional

from gateway.model import ModelCard
from gateway.ollama_names import tag_name

_BYTES_PER_PARAM = {"bf16": 2.0, "fp16": 2.0, "f16": 2.0, "fp32": 4.0, "f32": 4.0, "nvfp4": 0.5625, "fp8": 1.0}


def created_at(now: Optional[datetime] = None) -> str:
    """A UTC time as Go's time.Time MarshalJSON writes Ollama's created_at, modified_at and expires_at: RFC 3339 with
    nanoseconds, trailing zeros cut ("2025-07-07T20:22:19.19314Z"; a whole second has no fraction). Without `now`,
    the clock's time to the nanosecond, as Ollama's time.Now()."""
    if now is None:
        seconds, nanos = divmod(time.time_ns(), 10**9)
        now = datetime.fromtimestamp(seconds, timezone.utc)
    else:
        now = now.astimezone(timezone.utc)
        nanos = now.microsecond * 1000
    fraction = f"{nanos:09d}".rstrip("0")
    return now.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def parameter_size(num_parameters: int) -> str:
    """The parameter count as Ollama's format.HumanNumber writes details.parameter_size: "27B" or "26.9B" (one
    decimal unless whole), "125M" or "500.55M" (two unless whole), "600K" (none), the bare number below a thousand."""
    for scale, suffix, decimals in ((10**9, "B", 1), (10**6, "M", 2)):
        if num_parameters >= scale:
            number = num_parameters / scale
            return f"{number:.0f}{suffix}" if number.is_integer() else f"{number:.{decimals}f}{suffix}"
    if num_parameters >= 1000:
        return f"{num_parameters / 1000:.0f}K"
    return str(num_parameters)


def arch_family(architecture: str) -> str:
    """A transformers class name as a family id: "Qwen3_5ForConditionalGeneration" -> "qwen3_5"."""
    base = re.sub(r"For[A-Za-z]+$", "", architecture or "") or "unknown"
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base).lower()


def model_details(card: ModelCard) -> dict:
    """Ollama's `details` of a model (/api/tags, /api/show, /api/ps): family from the architecture, parameter size,
    quantization level."""
    family = arch_family(card.architecture)
    return {"parent_model": "", "format": "safetensors", "family": family, "families": [family],
            "parameter_size": parameter_size(card.num_parameters), "quantization_level": card.quantization.upper()}


def model_size(card: ModelCard) -> int:
    """Bytes of weights, estimated from the parameter count and the quantization."""
    return int(card.num_parameters * _BYTES_PER_PARAM.get(card.quantization.lower(), 2.0))


def _digest(card: ModelCard) -> str:
    # Synthetic but stable: clients use the digest only to tell models apart.
    return hashlib.sha256(f"{card.model_id}:{card.quantization}:{card.num_parameters}".encode()).hexdigest()


def embedding_length(card: ModelCard) -> int:
    """The checkpoint's hidden size (a multimodal one's text_config first), Ollama's "<arch>.embedding_length"; 0
    when config.json gives none."""
    text = card.config.get("text_config")
    size = (text if isinstance(text, dict) and "hidden_size" in text else card.config).get("hidden_size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0


def tags_entry(card: ModelCard, served_name: str) -> dict:
    """One /api/tags model; as Ollama lists it since 0.30, with its context length and capabilities (the ones
    /api/show gives), so a client can pick a model for tools or thinking from the list alone, and (Ollama 0.32's
    model list cache, server/model_list_cache.go) its embedding length, left out when unknown (omitempty)."""
    name = tag_name(served_name)
    modified = datetime.fromtimestamp(card.created, timezone.utc)
    details = {**model_details(card), "context_length": card.max_context_len}
    if embedding_length(card):
        details["embedding_length"] = embedding_length(card)
    return {"name": name, "model": name, "modified_at": created_at(modified), "size": model_size(card),
            "digest": _digest(card), "details": details, "capabilities": capabilities(card)}


def ps_entry(card: ModelCard, served_name: str, expires_at: float = float("inf"), on_cpu: bool = False,
             context_length: Optional[int] = None) -> dict:
    """One /api/ps model; expires_at is a Unix time (inf: kept forever, shown as Ollama shows it: now plus Go's
    longest Duration, 2^63 - 1 ns, about 292 years, the time.Now().Add(sessionDuration) of server/sched.go).
    size_vram is the part of it in GPU memory: 0 on the CPU, as Ollama reports a model it runs there (`ollama ps`
    reads that as "100% CPU"). context_length is the window the model was last used with (None: the model's)."""
    name = tag_name(served_name)
    if expires_at == float("inf"):
        expires = datetime.now(timezone.utc) + timedelta(microseconds=(2**63 - 1) // 1000)
    else:
        expires = datetime.fromtimestamp(expires_at, timezone.utc)
    return {"name": name, "model": name, "size": model_size(card), "digest": _digest(card),
            "details": model_details(card), "expires_at": created_at(expires), "size_vram": 0 if on_cpu else model_size(card),
            "context_length": context_length or card.max_context_len}


def recommendation(card: ModelCard, served_name: str) -> dict:
    """The served model as one of Ollama's model recommendations (api.ModelRecommendation, GET
    /api/experimental/model-recommendations): named as `ollama launch` lists an installed model (":latest" left off,
    cmd/launch/models.go buildModelListWithRecommendations), so its picker marks the served model recommended instead
    of offering Ollama's built-in picks, which this server cannot pull; context_length is its window."""
    name = tag_name(served_name)
    return {"model": name.removesuffix(":latest"), "description": "The model this server serves",
            "context_length": card.max_context_len}


def capabilities(card: ModelCard) -> list:
    """Ollama's capabilities of the served model: completion, and tools / thinking when its chat template takes them."""
    caps = ["completion"]
    if card.takes_tools:
        caps.append("tools")
    if card.thinks:
        caps.append("thinking")
    return caps
