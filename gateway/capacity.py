"""Gateway process: GET /v1/info and GET /v1/capacity, the released engine's two state routes (../shared/research/
seed-engine.md 2.1), answered from the scheduler's Load and the model card: what a balancer or an operator's
script reads to place requests without scraping Prometheus. Both need the API key where one is set, as /v1 does;
503 in the OpenAI error shape while the scheduler does not answer.

/v1/info:     {model, max_context, max_output_tokens, tp, devices, healthy, architecture, quantization,
               num_parameters} (tp: workers per model, 1 here; devices: the live worker's, [] while none is;
               healthy: a live worker and not draining; max_output_tokens: the context less the one prompt token a
               generation needs).
/v1/capacity: {active_requests, waiting_requests, free_kv_blocks, total_kv_blocks, max_num_seqs, max_queue_depth
               (0: unlimited), accepting_requests} (accepting: a live worker, not draining and room in the queue).
/load:        {server_load}, vLLM's GET /load (vllm/entrypoints/serve/instrumentator/basic.py): the requests in
              progress, as its load-aware routes count them (generations started and not yet ended), which load-aware
              routers poll.
"""
from __future__ import annotations

from aiohttp import web

from gateway.engine import Engine
from gateway.web import json_response

_LOAD_TIMEOUT_S = 2.0


def accepting(load) -> bool:
    """Whether a request sent now is admitted: a live worker, no drain, and the waiting queue under its limit."""
    room = load.max_queue_depth <= 0 or load.num_waiting < load.max_queue_depth
    return bool(load.worker_alive and not load.draining and room)


class CapacityRoutes:
    """GET /v1/info and GET /v1/capacity."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def register(self, app: web.Application) -> None:
        """Adds GET /v1/info, /v1/capacity and /load."""
        app.router.add_get("/v1/info", self.info)
        app.router.add_get("/v1/capacity", self.capacity)
        app.router.add_get("/load", self.server_load)

    async def info(self, request: web.Request) -> web.Response:
        """GET /v1/info: the served model, its context and output limits and whether it accepts requests."""
        load = await self.engine.client.load(timeout=_LOAD_TIMEOUT_S)
        card = await self.engine.card()
        live = bool(load.worker_alive)
        return json_response({"model": await self.engine.served_name(), "max_context": card.max_context_len,
                              "max_output_tokens": card.max_context_len - 1, "tp": 1,
                              "devices": [load.device] if live and load.device else [],
                              "healthy": live and not load.draining, "architecture": card.architecture,
                              "quantization": card.quantization, "num_parameters": card.num_parameters})

    async def capacity(self, request: web.Request) -> web.Response:
        """GET /v1/capacity: running and waiting requests, free and total KV blocks, the limits, accepting_requests."""
        load = await self.engine.client.load(timeout=_LOAD_TIMEOUT_S)
        return json_response({"active_requests": load.num_running, "waiting_requests": load.num_waiting,
                              "free_kv_blocks": load.num_free_blocks, "total_kv_blocks": load.num_total_blocks,
                              "max_num_seqs": load.max_num_seqs, "max_queue_depth": load.max_queue_depth,
                              "accepting_requests": accepting(load)})

    async def server_load(self, request: web.Request) -> web.Response:
        """GET /load (llama-cpp-python / SGLang style): {"server_load": generations running in this gateway}."""
        return json_response({"server_load": self.engine.num_generating()})
