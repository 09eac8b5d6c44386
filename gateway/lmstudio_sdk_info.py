"""Gateway process: the served model as LM Studio's SDK describes it (lmstudio-python _sdk_models LlmInstanceInfo,
LlmInfo, the load config's KV fields) and which model specifiers name it."""
from __future__ import annotations

from typing import Any

from gateway.lmstudio_v1_shape import model_entry
from gateway.model import ModelCard
from gateway.openai_plan import served


def download_info(card: ModelCard, served_name: str) -> dict:
    """The model as listDownloadedModels lists it (LlmInfo): its key, format (LM Studio's "safetensors" for a
    Hugging Face checkpoint), size, context length and whether its template takes tools."""
    entry = model_entry(card, served_name, None)
    info = {"type": "llm", "modelKey": served_name, "format": "safetensors", "displayName": entry["display_name"],
            "path": card.model_id or served_name, "sizeBytes": entry["size_bytes"], "vision": False,
            "trainedForToolUse": card.takes_tools, "maxContextLength": card.max_context_len,
            "architecture": entry["architecture"]}
    if entry["params_string"]:
        info["paramsString"] = entry["params_string"]
    return info


def instance_info(card: ModelCard, served_name: str, identifier: str = "") -> dict:
    """A loaded instance (LlmInstanceInfo): download_info with its identifier and instanceReference (the served name,
    or another of SPARKINFER_SERVED_MODEL_NAME's: an instance each, fixed at start) and its context length."""
    identifier = identifier or served_name
    return {**download_info(card, served_name), "identifier": identifier, "instanceReference": identifier,
            "contextLength": card.max_context_len}


def load_config(card: ModelCard) -> dict:
    """getLoadConfig's KV config: the context length the instance was loaded with."""
    return {"fields": [{"key": "llm.load.contextLength", "value": card.max_context_len}]}


def matches(specifier: Any, card: ModelCard, served_name: str) -> bool:
    """Whether a model specifier ({type: query, query: {identifier, path, ...}} or {type: instanceReference,
    instanceReference}) names the served instance: an identifier or path the other APIs take for it
    (openai_plan.served: its aliases, 'default', the checkpoint folder; any name with
    SPARKINFER_SKIP_MODEL_NAME_VALIDATION); an empty query names any loaded model, as in LM Studio."""
    if not isinstance(specifier, dict):
        return specifier is None
    if specifier.get("type") == "instanceReference":
        return specifier.get("instanceReference") in (served_name, *card.served_aliases)
    query = specifier.get("query")
    if specifier.get("type") != "query" or not isinstance(query, dict):
        return False
    named = [query.get(key) for key in ("identifier", "path") if query.get(key) is not None]
    known = all(isinstance(name, str) and (card.any_model_name or served(name, card, served_name)) for name in named)
    return known and query.get("domain") in (None, "llm")
