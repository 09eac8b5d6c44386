"""Gateway process: Ollama model names, matched to the served model as Ollama's getExistingName finds them."""
from __future__ import annotations

from gateway.errors import InvalidRequest, NotFound
from gateway.model import ModelCard


def tag_name(served_name: str) -> str:
    """The served name as Ollama lists it: with its tag, ":latest" when it has none."""
    return served_name if ":" in served_name.rsplit("/", 1)[-1] else f"{served_name}:latest"


def model_names(card: ModelCard, served_name: str) -> set:
    return {served_name, card.model_id, "default"}


def _canonical(name: str) -> str:
    """An Ollama model name as Ollama compares it: case-insensitive, ":latest" when no tag is given, and the default
    registry host and "library" namespace optional ("registry.ollama.ai/library/x:latest" is "x:latest")."""
    name = name.lower()
    for prefix in ("registry.ollama.ai/", "library/"):
        name = name.removeprefix(prefix)
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def serves(name: str, card: ModelCard, served_name: str) -> bool:
    """Whether name is the served model as Ollama would find it (any case, ":latest" and the library namespace
    optional)."""
    return _canonical(name) in {_canonical(known) for known in model_names(card, served_name)}


def resolve_model(body: dict, card: ModelCard, served_name: str, key: str = "model") -> str:
    """The requested model name; 400 when missing, else Ollama's 404 body ("model 'x' not found") unless it names
    the served model."""
    name = body.get(key)
    if not name and key == "model":
        name = body.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidRequest("model is required", param="model")
    if serves(name, card, served_name):
        return name
    raise NotFound(f"model '{name}' not found", param="model")
