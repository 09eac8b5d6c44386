"""Gateway process: llama-cpp-python's server extras, as its llama_cpp/server/app.py serves them: /extras/tokenize,
/extras/tokenize/count and /extras/detokenize, and its Copilot path /v1/engines/copilot-codex/completions.

Clients written for that server count tokens there (llama-cpp-agent's LlamaCppServerProvider with
llama_cpp_python_server=True posts {"input": ...} to /extras/tokenize and its completions to the Copilot path; context
budgeting clients post to /extras/tokenize/count); they were 404s here."""
from __future__ import annotations

from aiohttp import web

from gateway.engine import Engine
from gateway.offload import run_cpu
from gateway.openai_plan import check_model
from gateway.openai_checks import vocab_ids
from gateway.openai_routes import OpenAIRoutes
from gateway.openai_schema import DETOKENIZE_SCHEMA
from gateway.schema_validate import validate
from gateway.web import json_response, read_json

# llama-cpp-python's TokenizeInputRequest: the text and an optional model alias.
TOKENIZE_INPUT_SCHEMA = {
    "type": "object",
    "required": ["input"],
    "properties": {"model": {"type": ["string", "null"]}, "input": {"type": "string"}},
}


class LlamaCppPythonRoutes:
    """The extras over the served model's tokenizer; the Copilot path is /v1/completions."""

    def __init__(self, engine: Engine, openai_routes: OpenAIRoutes):
        self.engine = engine
        self.openai = openai_routes

    def register(self, app: web.Application) -> None:
        """Adds llama-cpp-python's /extras/tokenize, /extras/tokenize/count, /extras/detokenize and its Copilot
        completions path."""
        app.router.add_post("/extras/tokenize", self.tokenize)
        app.router.add_post("/extras/tokenize/count", self.count)
        app.router.add_post("/extras/detokenize", self.detokenize)
        app.router.add_post("/v1/engines/copilot-codex/completions", self.openai.completions)

    async def _ids(self, request: web.Request) -> list:
        """The input's ids: special-token text read as the token, as llama-cpp-python tokenizes it (special=True)."""
        body = validate(await read_json(request), TOKENIZE_INPUT_SCHEMA)
        card = await self.engine.card()
        check_model(body.get("model"), card, await self.engine.served_name())
        return await run_cpu(card.encode, body["input"])

    async def tokenize(self, request: web.Request) -> web.Response:
        """POST /extras/tokenize: {"tokens": ids} of `input` (special-token text read as the token)."""
        return json_response({"tokens": await self._ids(request)})

    async def count(self, request: web.Request) -> web.Response:
        """POST /extras/tokenize/count: {"count": N} tokens of `input`."""
        return json_response({"count": len(await self._ids(request))})

    async def detokenize(self, request: web.Request) -> web.Response:
        """{"text"}: special tokens left out, as llama-cpp-python's Llama.detokenize (special=False) writes them."""
        body = validate(await read_json(request), DETOKENIZE_SCHEMA)
        card = await self.engine.card()
        check_model(body.get("model"), card, await self.engine.served_name())
        return json_response({"text": await run_cpu(card.decode, vocab_ids(card, body["tokens"]))})
