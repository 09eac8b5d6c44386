"""Gateway process: aiohttp handlers of Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) over the one
generation path, as vLLM, Ollama and LM Studio serve it."""
from __future__ import annotations

from aiohttp import web

from gateway.anthropic_request import count_tokens, parse_messages
from gateway.anthropic_shape import AnthropicFramer, MessageBuilder
from gateway.config import GatewayConfig
from gateway.engine import Engine
from gateway.http_stream import stream_generation
from gateway.offload import run_cpu
from gateway.web import json_response, read_json


class AnthropicRoutes:
    """The Messages surface; errors on these paths take Anthropic's shape (http_server.api_error_response)."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine = engine
        self.config = config

    def register(self, app: web.Application) -> None:
        """Adds POST /v1/messages and /v1/messages/count_tokens."""
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_post("/v1/messages/count_tokens", self.count_tokens)

    async def messages(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/messages: a Messages request answered as a Message, or streamed as Anthropic's events (stream true);
        the anthropic-beta interleaved-thinking header lets budget_tokens pass max_tokens."""
        body = await read_json(request)
        card = await self.engine.card()
        # Interleaved thinking (a beta until Claude 4.6) lets budget_tokens exceed max_tokens.
        interleaved = "interleaved-thinking" in request.headers.get("anthropic-beta", "")
        plan = await run_cpu(parse_messages, body, card, await self.engine.served_name(),
                             interleaved=interleaved)
        thinking = body.get("thinking") if isinstance(body, dict) else None  # checked by parse_messages
        builder = MessageBuilder(plan, card, isinstance(thinking, dict) and thinking.get("display") == "omitted")
        gen = await self.engine.start(plan.gen)
        if plan.stream:
            return await stream_generation(request, gen, AnthropicFramer(builder), self.config.sse_keepalive_s)
        await gen.drain(builder.push)
        builder.close()
        return json_response(builder.message(gen.usage()))

    async def count_tokens(self, request: web.Request) -> web.Response:
        """POST /v1/messages/count_tokens: {"input_tokens": N}, the rendered prompt's tokens (system, messages,
        tools)."""
        body = await read_json(request)
        card = await self.engine.card()
        num_tokens = await run_cpu(count_tokens, body, card, await self.engine.served_name())
        return json_response({"input_tokens": num_tokens})
