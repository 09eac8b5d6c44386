"""Gateway process: the model and tokenizer routes of the text-completion servers SillyTavern, and other front-ends
written for them, connect to: TabbyAPI's GET /v1/model/list, GET /v1/model, POST /v1/token/encode and /v1/token/decode
(its endpoints/core/router.py), text-generation-webui's GET /v1/internal/model/info, /v1/internal/model/list and POST
/v1/internal/encode, /decode, /token-count (its OpenAI extension's script.py), and KoboldCpp's POST
/api/extra/tokencount (also /api/extra/tokenize, its alias) and /api/extra/detokenize.

SillyTavern's TabbyAPI source lists the models at /v1/model/list before anything else (its text-completions /status):
a 404 there was "Models endpoint is offline" and the source never connected. Its TabbyAPI, text-generation-webui and
KoboldCpp sources count tokens on the server (tokenizers.js /remote/textgenerationwebui/encode): a 404 made it fall
back to a guess from another model's tokenizer, which trims the chat history to the wrong context.
"""
from __future__ import annotations

from typing import Optional

from aiohttp import web

from gateway.engine import Engine
from gateway.model import ModelCard
from gateway.offload import run_cpu
from gateway.openai_routes import render_body, rendered_messages
from gateway.openai_checks import vocab_ids
from gateway.schema_validate import validate
from gateway.web import json_response, read_json

_FLAG = {"type": ["boolean", "null"]}
_IDS = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}}
# TabbyAPI's TokenEncodeRequest / TokenDecodeRequest (endpoints/core/types/token.py): the text a string or a list of
# chat messages, with template_vars for the chat template.
TABBY_ENCODE = {"type": "object", "required": ["text"], "properties": {
    "text": {"type": ["string", "array"]}, "template_vars": {"type": ["object", "null"]},
    "add_bos_token": _FLAG, "encode_special_tokens": _FLAG, "decode_special_tokens": _FLAG}}
TABBY_DECODE = {"type": "object", "required": ["tokens"], "properties": {
    "tokens": _IDS, "add_bos_token": _FLAG, "encode_special_tokens": _FLAG, "decode_special_tokens": _FLAG}}
# text-generation-webui's EncodeRequest / DecodeRequest (extensions/openai/typing.py).
OOBA_ENCODE = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
OOBA_DECODE = {"type": "object", "required": ["tokens"], "properties": {"tokens": _IDS}}
# KoboldCpp's tokencount body: the text and whether special-token text is read as the token (its default).
KOBOLD_COUNT = {"type": "object", "required": ["prompt"], "properties": {"prompt": {"type": "string"},
                                                                          "special": _FLAG}}
KOBOLD_DECODE = {"type": "object", "required": ["ids"], "properties": {"ids": _IDS}}


def _chat_ids(chat: dict, card: ModelCard) -> list:
    """The ids of a chat body's rendered prompt (CPU work: run it off the loop)."""
    return card.encode(rendered_messages(chat, card))


def tabby_card(card: ModelCard, name: str) -> dict:
    """TabbyAPI's ModelCard (endpoints/core/types/model.py) of the served model: its parameters are the ones known
    here (the context as max_seq_len, no rope scaling, no draft model, text only)."""
    return {"id": name, "object": "model", "created": card.created, "owned_by": "tabbyAPI", "logging": None,
            "parameters": {"max_seq_len": card.max_context_len, "rope_scale": 1.0, "rope_alpha": 1.0,
                           "prompt_template": None, "use_vision": False, "draft": None}}


class TextgenCompatRoutes:
    """TabbyAPI's, text-generation-webui's and KoboldCpp's model and tokenizer routes over the served model."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def register(self, app: web.Application) -> None:
        """Adds the routes named in the module docstring."""
        app.router.add_get("/v1/model/list", self.tabby_list)
        app.router.add_get("/v1/model", self.tabby_model)
        app.router.add_post("/v1/token/encode", self.tabby_encode)
        app.router.add_post("/v1/token/decode", self.tabby_decode)
        app.router.add_get("/v1/internal/model/info", self.ooba_info)
        app.router.add_get("/v1/internal/model/list", self.ooba_list)
        app.router.add_post("/v1/internal/encode", self.ooba_encode)
        app.router.add_post("/v1/internal/decode", self.ooba_decode)
        app.router.add_post("/v1/internal/token-count", self.ooba_count)
        for path in ("/api/extra/tokencount", "/api/extra/tokenize"):
            app.router.add_post(path, self.kobold_count)
        app.router.add_post("/api/extra/detokenize", self.kobold_decode)

    async def _encode(self, request: web.Request, schema: dict, key: str, special: Optional[str]) -> list:
        """The ids of the body's `key` text; its special-token text read as the token unless `special` is false."""
        body = validate(await read_json(request), schema)
        card = await self.engine.card()
        encode = card.encode if body.get(special) is not False else card.encode_literal
        return await run_cpu(encode, body[key])

    async def _decode(self, request: web.Request, schema: dict, keep_special: bool, key: str = "tokens") -> str:
        body = validate(await read_json(request), schema)
        card = await self.engine.card()
        keep = keep_special and body.get("decode_special_tokens") is not False
        return await run_cpu(card.decode, vocab_ids(card, body[key]), not keep)

    async def tabby_list(self, request: web.Request) -> web.Response:
        """GET /v1/model/list: TabbyAPI's ModelList, the served model alone."""
        card = await self.engine.card()
        return json_response({"object": "list", "data": [tabby_card(card, await self.engine.served_name())]})

    async def tabby_model(self, request: web.Request) -> web.Response:
        """GET /v1/model: TabbyAPI's card of the loaded model."""
        return json_response(tabby_card(await self.engine.card(), await self.engine.served_name()))

    async def tabby_encode(self, request: web.Request) -> web.Response:
        """POST /v1/token/encode: {"tokens", "length"} (encode_special_tokens, default true: special-token text is
        the token). A list of chat messages as the text is the chat template's prompt for them without the generation
        prompt, template_vars its variables, as TabbyAPI's encode_tokens renders them (endpoints/core/router.py);
        the prompt /v1/tokenize gives those messages with add_generation_prompt false (their control-token text stays
        text, as on the chat routes)."""
        body = validate(await read_json(request), TABBY_ENCODE)
        card = await self.engine.card()
        if isinstance(body["text"], list):
            chat = render_body({"messages": body["text"], "add_generation_prompt": False,
                                "chat_template_kwargs": body.get("template_vars") or {}})
            ids = await run_cpu(_chat_ids, chat, card)
        else:
            encode = card.encode if body.get("encode_special_tokens") is not False else card.encode_literal
            ids = await run_cpu(encode, body["text"])
        return json_response({"tokens": ids, "length": len(ids)})

    async def tabby_decode(self, request: web.Request) -> web.Response:
        """POST /v1/token/decode: {"text"}, special tokens kept unless decode_special_tokens is false."""
        return json_response({"text": await self._decode(request, TABBY_DECODE, True)})

    async def ooba_info(self, request: web.Request) -> web.Response:
        """GET /v1/internal/model/info: {"model_name", "lora_names", "loader"} as text-generation-webui answers."""
        return json_response({"model_name": await self.engine.served_name(), "lora_names": [],
                              "loader": "sparkinfer"})

    async def ooba_list(self, request: web.Request) -> web.Response:
        """GET /v1/internal/model/list: {"model_names": [the served model]}."""
        return json_response({"model_names": [await self.engine.served_name()]})

    async def ooba_encode(self, request: web.Request) -> web.Response:
        """POST /v1/internal/encode: {"tokens", "length"} of `text`."""
        ids = await self._encode(request, OOBA_ENCODE, "text", None)
        return json_response({"tokens": ids, "length": len(ids)})

    async def ooba_decode(self, request: web.Request) -> web.Response:
        """POST /v1/internal/decode: {"text"}, special tokens left out as its decode(skip_special_tokens=True)."""
        return json_response({"text": await self._decode(request, OOBA_DECODE, False)})

    async def ooba_count(self, request: web.Request) -> web.Response:
        """POST /v1/internal/token-count: {"length"} of `text`."""
        return json_response({"length": len(await self._encode(request, OOBA_ENCODE, "text", None))})

    async def kobold_count(self, request: web.Request) -> web.Response:
        """POST /api/extra/tokencount: KoboldCpp's {"value": N, "ids": [...]} of `prompt`."""
        ids = await self._encode(request, KOBOLD_COUNT, "prompt", "special")
        return json_response({"value": len(ids), "ids": ids})

    async def kobold_decode(self, request: web.Request) -> web.Response:
        """POST /api/extra/detokenize: KoboldCpp's {"result": text, "success": true} of `ids`."""
        return json_response({"result": await self._decode(request, KOBOLD_DECODE, False, "ids"), "success": True})
