"""Gateway process: LM Studio /api/v1 model management (load, unload, download) answered for the one model served.

The served model is fixed when the server starts, so it is always downloaded and, while a worker runs it, loaded:
a load of it answers as LM Studio's load does once the model is in memory (lmstudio.ai/docs/developer/rest/load:
type, instance_id, load_time_seconds, status "loaded", and load_config with echo_load_config), and a download of it
as LM Studio's download of a model it has (docs developer/rest/download: {"status": "already_downloaded"}). Clients
that load or download the model they are about to use, as LM Studio's own workflows do, go on to chat instead of
stopping at a 501. Loading another model is the 404 every route gives a model this server lacks (LM Studio's for a
model it does not have); downloading one is the 501 with the reason.
"""
from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest, NotImplementedApi, Unavailable
from gateway.lmstudio_v1_request import check_keys, check_positive_int
from gateway.lmstudio_v1_shape import load_config
from gateway.model import ModelCard
from gateway.openai_plan import check_model, served

FIXED = "the served model is fixed when the server starts"
# The fields of LM Studio's load and download bodies (its docs); any other key is its strict body check's 400.
LOAD_FIELDS = frozenset({"model", "context_length", "eval_batch_size", "flash_attention", "num_experts",
                         "offload_kv_cache_to_gpu", "echo_load_config"})
DOWNLOAD_FIELDS = frozenset({"model", "quantization"})
UNLOAD_FIELDS = frozenset({"instance_id"})


def _required(body: Any, key: str, fields: frozenset) -> str:
    """body[key], a non-empty string; 400 for a body LM Studio refuses (no object, no such string, a key of the body
    not among `fields`)."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f'"{key}" is required', param=key, code="missing_required_parameter")
    check_keys(body, fields)
    return value


def load_answer(body: Any, card: ModelCard, served_name: str, load) -> dict:
    """POST /api/v1/models/load of the served model: LM Studio's answer for a model in memory (loaded in no time),
    `load` the scheduler's pb.LoadResponse; 503 while no worker runs it (None: nothing here can load it)."""
    check_model(_required(body, "model", LOAD_FIELDS), card, served_name)
    for name in ("context_length", "eval_batch_size", "num_experts"):
        check_positive_int(body, name)
    for name in ("flash_attention", "offload_kv_cache_to_gpu", "echo_load_config"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise InvalidRequest(f'"{name}" must be a boolean', param=name)
    if load is None:
        raise Unavailable(f"'{served_name}' cannot be loaded now: the scheduler has no live worker")
    answer = {"type": "llm", "instance_id": served_name, "load_time_seconds": 0.0, "status": "loaded"}
    if body.get("echo_load_config"):
        answer["load_config"] = load_config(card, load)
    return answer


def download_answer(body: Any, card: ModelCard, served_name: str) -> dict:
    """POST /api/v1/models/download of the served model: LM Studio's answer for a model it already has."""
    if not served(_required(body, "model", DOWNLOAD_FIELDS), card, served_name):
        raise NotImplementedApi(f"downloading models is not supported: {FIXED} (it serves '{served_name}')",
                                param="model")
    return {"status": "already_downloaded"}


def unload_answer(body: Any, card: ModelCard, served_name: str) -> dict:
    """POST /api/v1/models/unload of the served instance: LM Studio's {"instance_id"} (docs developer/rest/unload).
    The model stays in memory; the caller marks it unloaded for the model lists until a request loads it again, as
    Ollama's keep_alive 0 does for /api/ps. Another instance is the 404 of a model this server lacks."""
    instance = _required(body, "instance_id", UNLOAD_FIELDS)
    check_model(instance, card, served_name)
    return {"instance_id": instance}
