"""Gateway process: llama.cpp server's POST /v1/chat/completions/input_tokens (also without /v1), the input token
count of a chat body, as llama-server answers it (tools/server server.cpp: post_chat_completions_tok ->
server-context.cpp handle_count_tokens, which renders the body as its chat route does and tokenizes the prompt)."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.chat_prompt import llama_cpp_prefill
from gateway.config import GatewayConfig
from gateway.engine import Engine
from gateway.errors import count_past_context
from gateway.model import ModelCard
from gateway.offload import run_cpu
from gateway.openai import parse_chat
from gateway.openai_routes import check_request_template
from gateway.web import json_response, read_json

# Fields that bound or shape the output, not the prompt: left out so that a limit past the context does not refuse
# the count.
_OUTPUT_FIELDS = ("max_tokens", "max_completion_tokens", "n_predict", "stream", "stream_options", "n")


def count_chat_tokens(body: Any, card: ModelCard, served_name: str) -> int:
    """The prompt tokens POST /v1/chat/completions would generate from for this body (its rendering, tools and
    chat_template_kwargs included). A prompt past the context is counted, as llama-server counts it (its count route
    has no context check): clients ask to learn that a conversation no longer fits. Raises the chat route's 400 / 404
    for a body it would refuse; a prompt refused for its size before tokenizing (only a lower bound known) stays the
    400. CPU work: run it off the loop."""
    if isinstance(body, dict):
        body = {name: value for name, value in body.items() if name not in _OUTPUT_FIELDS}
    return count_past_context(lambda: parse_chat(body, card, served_name).gen.prompt_ids)


class ChatInputTokensRoutes:
    """llama-server's chat token count route, with and without /v1."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine, self.config = engine, config

    def register(self, app: web.Application) -> None:
        """Adds POST /v1/chat/completions/input_tokens and /chat/completions/input_tokens."""
        app.router.add_post("/v1/chat/completions/input_tokens", self.count)
        app.router.add_post("/chat/completions/input_tokens", self.count)

    async def count(self, request: web.Request) -> web.Response:
        """{"input_tokens": N, "object": "response.input_tokens"}: the prompt's tokens, as llama-server answers a
        chat body there; a body the chat route refuses gets its error."""
        body = llama_cpp_prefill(await read_json(request))
        check_request_template(body, self.config)
        card = await self.engine.card()
        num_tokens = await run_cpu(count_chat_tokens, body, card, await self.engine.served_name())
        return json_response({"input_tokens": num_tokens, "object": "response.input_tokens"})
