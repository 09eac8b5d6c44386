"""Gateway process: SGLang's server-info routes, GET /model_info and /weight_version (and their older names
/get_model_info and /get_weight_version, which SGLang still answers): what SGLang clients, benchmark scripts and server
probes read the served model from (its path, that it generates, which modalities it reads, its architecture).

/model_info:     {model_path, tokenizer_path, is_generation, preferred_sampling_params, weight_version,
                  has_image_understanding, has_audio_understanding, model_type, architectures}, as SGLang's
                  http_server answers it: the checkpoint the server loaded (its tokenizer is the checkpoint's), a
                  generative model, SGLang's defaults for the two server arguments (no preferred sampling parameters,
                  weight version "default"), text only, and config.json's model type and architectures.
/weight_version: {weight_version}: "default" (the weights are the checkpoint's, never updated in place here).
Both need the API key where one is set: SGLang's key check covers every route but /health and /metrics.
"""
from __future__ import annotations

from aiohttp import web

from gateway.engine import Engine
from gateway.model import ModelCard
from gateway.web import json_response

# SGLang's server_args.weight_version default: the version of weights loaded at start.
WEIGHT_VERSION = "default"


def model_info(card: ModelCard) -> dict:
    """SGLang's /model_info for this card."""
    architectures = card.config.get("architectures")
    if not isinstance(architectures, list):
        architectures = [card.architecture] if card.architecture else []
    return {"model_path": card.model_id, "tokenizer_path": card.model_id, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": WEIGHT_VERSION,
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": card.config.get("model_type"), "architectures": architectures}


class SGLangInfoRoutes:
    """GET /model_info, /get_model_info, /weight_version and /get_weight_version."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def register(self, app: web.Application) -> None:
        for path in ("/model_info", "/get_model_info"):
            app.router.add_get(path, self.model_info)
        for path in ("/weight_version", "/get_weight_version"):
            app.router.add_get(path, self.weight_version)

    async def model_info(self, request: web.Request) -> web.Response:
        return json_response(model_info(await self.engine.card()))

    async def weight_version(self, request: web.Request) -> web.Response:
        return json_response({"weight_version": WEIGHT_VERSION})
