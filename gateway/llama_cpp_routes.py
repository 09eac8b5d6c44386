"""Gateway process: llama.cpp server's own routes (GET /props), for clients written against llama-server."""
from __future__ import annotations

from aiohttp import web

from gateway.engine import Engine
from gateway.errors import NotImplementedApi
from gateway.openai_sampling import read_sampling
from gateway.web import json_response

# llama.cpp's LLAMA_DEFAULT_SEED: the seed its /props states for "random".
_RANDOM_SEED = 0xFFFFFFFF


def _default_params(card) -> dict:
    """What a request that sets nothing gets (the checkpoint's generation_config over the engine's defaults), under
    llama.cpp's names: n_predict -1 is no limit, repeat_last_n -1 the whole context, seed 4294967295 random."""
    sampling = read_sampling({}, card)
    return {"n_predict": -1, "seed": _RANDOM_SEED, "temperature": sampling.temperature, "top_k": sampling.top_k,
            "top_p": sampling.top_p, "min_p": sampling.min_p, "typical_p": sampling.typical_p,
            "repeat_last_n": sampling.repetition_window or -1, "repeat_penalty": sampling.repetition_penalty,
            "presence_penalty": sampling.presence_penalty, "frequency_penalty": sampling.frequency_penalty,
            "stop": [], "ignore_eos": False, "stream": False}


class LlamaCppRoutes:
    """llama-server's GET /props: the context window, slots and template a llama.cpp client reads before it sends."""

    def __init__(self, engine: Engine, version: str):
        self.engine = engine
        self.build_info = f"sparkinfer {version}"

    def register(self, app: web.Application) -> None:
        app.router.add_get("/props", self.props)
        app.router.add_post("/props", self.set_props)

    async def props(self, request: web.Request) -> web.Response:
        card = await self.engine.card()
        load = await self.engine.client.load(timeout=2.0)
        name = await self.engine.served_name()
        specials = card.special_tokens
        # n_ctx is one request's window (llama.cpp's per-slot n_ctx), total_slots the requests that run at once.
        return json_response({
            "default_generation_settings": {"n_ctx": card.max_context_len, "params": _default_params(card)},
            "total_slots": load.max_num_seqs, "model_alias": name, "model_path": card.model_id,
            "modalities": {"vision": False, "audio": False}, "chat_template": card.chat_template_source,
            "bos_token": specials.get("bos_token", ""), "eos_token": specials.get("eos_token", ""),
            "build_info": self.build_info, "endpoint_slots": False, "endpoint_props": False,
            "endpoint_metrics": True, "is_sleeping": False})

    async def set_props(self, request: web.Request) -> web.Response:
        # llama.cpp's answer without --props (ERROR_TYPE_NOT_SUPPORTED): the settings are the server's to set.
        raise NotImplementedApi("This server does not support changing global properties.", code="not_supported")
