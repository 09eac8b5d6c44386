"""Gateway process: the KoboldAI API's error shape, {"detail": {"msg": "...", "type": "..."}}, as KoboldCpp writes
every error of its own (LostRuins/koboldcpp koboldcpp.py: "bad_input" for a body it cannot read, "unauthorized" for a
wrong key, "service_unavailable" while busy) and KoboldAI clients read it (SillyTavern's KoboldAI source shows
`detail.msg`). Its routes sit under /api/v1/ beside LM Studio's and under /api/extra/ beside Ollama's /api/*: only
these paths take it.
"""
from __future__ import annotations

from aiohttp import web

from gateway.errors import ApiError
from gateway.web import json_response

# The KoboldAI routes under /api/v1/ (gateway/kobold_api.py); every /api/extra/* route is KoboldCpp's.
KOBOLD_V1_PATHS = frozenset({"/api/v1/generate", "/api/v1/model", "/api/v1/info/version",
                             "/api/v1/config/max_context_length", "/api/v1/config/max_length"})
_TYPES = {401: "unauthorized", 503: "service_unavailable"}


def is_kobold_path(path: str) -> bool:
    """Whether `path` (trailing slashes ignored) is one of the KoboldAI API's routes."""
    path = path.rstrip("/")
    return path in KOBOLD_V1_PATHS or path.startswith("/api/extra/")


def kobold_error(error: ApiError) -> dict:
    """KoboldCpp's error body for `error`: its message as detail.msg, a client's fault "bad_input"."""
    kind = _TYPES.get(error.status) or ("bad_input" if error.status < 500 else "server_error")
    return {"detail": {"msg": error.message, "type": kind}}


def kobold_error_response(error: ApiError) -> web.Response:
    """The error in KoboldCpp's shape with its status and headers (Retry-After, ...)."""
    return json_response(kobold_error(error), status=error.status, headers=error.headers)
