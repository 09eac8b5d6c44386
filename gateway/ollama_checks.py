"""Gateway process: the checks Ollama's management and embedding handlers make of a body before their 501 here."""
from __future__ import annotations

from typing import Optional

from gateway.errors import Forbidden, InvalidRequest, NotFound
from gateway.ollama_names import INVALID_NAME, REMOTE_MODEL, is_cloud

# The body fields that name the model a management or embedding request acts on, and Ollama's 404 for a name it does
# not have (server/routes.go DeleteHandler, CopyHandler, EmbedHandler, EmbeddingsHandler; only the served model gets
# the 501) and its 400 for a name that is no Ollama name (DeleteHandler 'name "x" is invalid', CopyHandler 'source
# "x" is invalid', the others' 'invalid model name').
NAMED_MODEL = {
    ("DELETE", "/api/delete"): (("model", "name"), "model '{}' not found", 'name "{}" is invalid'),
    ("POST", "/api/copy"): (("source",), 'model "{}" not found', 'source "{}" is invalid'),
    ("POST", "/api/embed"): (("model",), "model '{}' not found", INVALID_NAME),
    ("POST", "/api/embeddings"): (("model",), 'model "{}" not found, try pulling it first', INVALID_NAME),
}
# The api struct and the names a route without a model of its own needs (keys, error, Ollama's words), for a body
# naming none: an empty name fails Ollama's model reference parse before anything else (DeleteHandler, PushHandler,
# EmbeddingsHandler 'model is required'; CopyHandler 'source "" is invalid'; EmbedHandler's 404 fallback, which names
# the model as sent), a 4xx, never the 501; where the handler trims the name first (modelref.ParseRef: delete, embed,
# embeddings), a blank one names none too. A null body is the empty struct (encoding/json decodes null without error).
REQUIRED = {
    ("DELETE", "/api/delete"): ("DeleteRequest", ((("model", "name"), InvalidRequest, "model is required"),)),
    ("POST", "/api/copy"): ("CopyRequest", ((("source",), InvalidRequest, 'source "" is invalid'),
                                            (("destination",), InvalidRequest, 'destination "" is invalid'))),
    ("POST", "/api/embed"): ("EmbedRequest", ((("model",), NotFound, "model '{}' not found"),)),
    ("POST", "/api/embeddings"): ("EmbeddingRequest", ((("model",), InvalidRequest, "model is required"),)),
    ("POST", "/api/push"): ("PushRequest", ((("model", "name"), InvalidRequest, "model is required"),)),
    ("POST", "/api/create"): ("CreateRequest", ((("model", "name"), InvalidRequest, "invalid model name"),)),
}


def _check_cloud(body: dict) -> None:
    """EmbedHandler and EmbeddingsHandler send a cloud model to Ollama's cloud, off here, before anything else."""
    if is_cloud(str(body.get("model") or "")):
        raise Forbidden(REMOTE_MODEL, param="model")


def _check_embed_input(body: dict) -> None:
    """Ollama's EmbedHandler takes input as a string or a list of strings (none is a load); any other value is its
    400 'invalid input type', checked before it looks the model up (server/routes.go EmbedHandler)."""
    _check_cloud(body)
    value = body.get("input")
    if value is None or isinstance(value, str):
        return
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidRequest("invalid input type", param="input")


# Checks of a body's fields a route makes after its model name and before it looks the model up.
FIELD_CHECKS = {("POST", "/api/embed"): _check_embed_input, ("POST", "/api/embeddings"): _check_cloud}


def _embed_load(body: dict) -> Optional[dict]:
    """EmbedHandler's answer to no input (absent, "" or []): the model is loaded and no vector given, the model named
    as sent (server/routes.go EmbedHandler 'len(input) == 0'; ollama/ollama#5713, #6295 preload an embedding model
    so); a list holding "" is input."""
    return {"model": body.get("model"), "embeddings": []} if body.get("input") in (None, "", []) else None


def _embeddings_load(body: dict) -> Optional[dict]:
    """EmbeddingsHandler's answer to no prompt, "an empty request loads the model" (server/routes.go): also what a
    client sending /api/embed's `input` to this route gets (ollama/ollama#7490, #13020)."""
    return None if body.get("prompt") else {"embedding": []}


# What a route answers, once its model is found, to a body that asks for no work: a load, as Ollama's handler answers
# it after scheduling the runner (its keep_alive then counts; /api/ps lists the model).
LOADS = {("POST", "/api/embed"): _embed_load, ("POST", "/api/embeddings"): _embeddings_load}
