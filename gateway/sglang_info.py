"""Gateway process: SGLang's server-info routes, GET /model_info and /weight_version (and their older names
/get_model_info and /get_weight_version, which SGLang still answers): what SGLang clients, benchmark scripts and server
probes read the served model from (its path, that it generates, which modalities it reads, its architecture).

/model_info:     {model_path, tokenizer_path, is_generation, preferred_sampling_params, weight_version,
                  has_image_understanding, has_audio_understanding, model_type, architectures}, as SGLang's
                  http_server answers it: the checkpoint the server loaded (its tokenizer is the checkpoint's), a
                  generative model, SGLang's defaults for the two server arguments (no preferred sampling parameters,
                  weight version "default"), text only, and config.json's model type and architectures.
/weight_version: {weight_version}: "default" (the weights are the checkpoint's, never updated in place here).
/get_server_info (also /server_info, SGLang's newer name): the server arguments and scheduler facts SGLang's router
                  (sgl-model-gateway registers a worker from them: served_model_name, dp_size) and clients (a request's
                  limit: max_req_input_len, the KV pool: max_total_num_tokens) read, for this server: one data-parallel
                  rank, one tensor-parallel rank, the context, SPARKINFER_MAX_NUM_SEQS as max_running_requests.
/get_load:        [{dp_rank, num_reqs, num_waiting_reqs, num_tokens}], SGLang's per-rank load its router balances on:
                  the requests running and waiting, and the KV tokens they hold.
/v1/loads:        {"loads": [{dp_rank, num_running_reqs, num_waiting_reqs, num_used_tokens, max_total_num_tokens,
                  token_usage, max_running_requests}]}, the load snapshot that replaces /get_load, which the newer
                  router (sgl-model-gateway's load poller) and RL rollout monitors read.
All need the API key where one is set: SGLang's key check covers every route but /health and /metrics.
"""
from __future__ import annotations

from aiohttp import web

from gateway.engine import Engine
from gateway.model import ModelCard
from gateway.web import json_response

# SGLang's server_args.weight_version default: the version of weights loaded at start.
WEIGHT_VERSION = "default"
_LOAD_TIMEOUT_S = 2.0


def model_info(card: ModelCard) -> dict:
    """SGLang's /model_info for this card."""
    architectures = card.config.get("architectures")
    if not isinstance(architectures, list):
        architectures = [card.architecture] if card.architecture else []
    return {"model_path": card.checkpoint_path, "tokenizer_path": card.checkpoint_path, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": WEIGHT_VERSION,
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": card.config.get("model_type"), "architectures": architectures}


def server_info(card: ModelCard, load, served_name: str, version: str) -> dict:
    """SGLang's /get_server_info for this server (server_args, scheduler_info, internal_states, version): a prompt may
    take the context less the one token a generation needs."""
    return {**model_info(card), "served_model_name": served_name, "context_length": card.max_context_len,
            "tp_size": 1, "dp_size": 1, "max_running_requests": load.max_num_seqs, "is_embedding": False,
            "max_total_num_tokens": load.num_total_blocks * load.block_size,
            "max_req_input_len": card.max_context_len - 1, "max_req_len": card.max_context_len,
            "internal_states": [{}], "version": version}


def load_entry(load) -> dict:
    """SGLang's /get_load entry of the one rank."""
    held = max(load.num_total_blocks - load.num_free_blocks - load.num_cached_blocks, 0)
    return {"dp_rank": 0, "num_reqs": load.num_running + load.num_waiting, "num_waiting_reqs": load.num_waiting,
            "num_tokens": held * load.block_size}


def loads_entry(load) -> dict:
    """SGLang's /v1/loads core snapshot of the one rank (token_usage: the KV tokens held over the pool's)."""
    total = load.num_total_blocks * load.block_size
    used = load_entry(load)["num_tokens"]
    return {"dp_rank": 0, "num_running_reqs": load.num_running, "num_waiting_reqs": load.num_waiting,
            "num_used_tokens": used, "max_total_num_tokens": total, "token_usage": used / total if total else 0.0,
            "max_running_requests": load.max_num_seqs}


class SGLangInfoRoutes:
    """GET /model_info, /get_model_info, /weight_version and /get_weight_version."""

    def __init__(self, engine: Engine, version: str = ""):
        self.engine, self.version = engine, version

    def register(self, app: web.Application) -> None:
        """Adds SGLang's model and server info routes (both spellings of each) and /get_load, /v1/loads."""
        for path in ("/model_info", "/get_model_info"):
            app.router.add_get(path, self.model_info)
        for path in ("/weight_version", "/get_weight_version"):
            app.router.add_get(path, self.weight_version)
        for path in ("/get_server_info", "/server_info"):
            app.router.add_get(path, self.server_info)
        app.router.add_get("/get_load", self.load)
        app.router.add_get("/v1/loads", self.loads)

    async def model_info(self, request: web.Request) -> web.Response:
        """GET /model_info: SGLang's model info of the served model."""
        return json_response(model_info(await self.engine.card()))

    async def weight_version(self, request: web.Request) -> web.Response:
        """GET /weight_version: the weights' version, fixed for a served checkpoint."""
        return json_response({"weight_version": WEIGHT_VERSION})

    async def server_info(self, request: web.Request) -> web.Response:
        """GET /server_info: SGLang's server info (limits, version, load)."""
        load = await self.engine.client.load(timeout=_LOAD_TIMEOUT_S)
        return json_response(server_info(await self.engine.card(), load, await self.engine.served_name(),
                                         self.version))

    async def load(self, request: web.Request) -> web.Response:
        """GET /get_load: SGLang's per-rank load list (one rank)."""
        return json_response([load_entry(await self.engine.client.load(timeout=_LOAD_TIMEOUT_S))])

    async def loads(self, request: web.Request) -> web.Response:
        """GET /v1/loads: SGLang's load snapshot ({"loads": [one rank]})."""
        return json_response({"loads": [loads_entry(await self.engine.client.load(timeout=_LOAD_TIMEOUT_S))]})
