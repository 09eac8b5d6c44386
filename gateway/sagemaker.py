"""Gateway process: POST /invocations, the inference route of Amazon SageMaker's container contract (its health route,
GET /ping, is /health's), as vLLM's server answers it: the body is a chat completions request when it has `messages`,
else a completions request when it has `prompt` (vLLM tries its ChatCompletionRequest, then its CompletionRequest),
answered, streamed or not, and refused, exactly as /v1/chat/completions and /v1/completions answer it. A body that is
neither is vLLM's 400 "Cannot find suitable handler for request."
"""
from __future__ import annotations

from aiohttp import web

from gateway.body import hand_on
from gateway.errors import InvalidRequest
from gateway.openai_routes import OpenAIRoutes
from gateway.web import read_json

# vLLM's names for the request types /invocations takes on a generative model, in the order it tries them.
_EXPECTED = "['ChatCompletionRequest', 'CompletionRequest']"


class SageMakerRoutes:
    """POST /invocations over the OpenAI routes' chat and completions handlers."""

    def __init__(self, openai: OpenAIRoutes):
        self.openai = openai

    def register(self, app: web.Application) -> None:
        """Adds POST /invocations."""
        app.router.add_post("/invocations", self.invocations)

    async def invocations(self, request: web.Request) -> web.StreamResponse:
        """POST /invocations (SageMaker, as vLLM routes it): a body with messages goes to chat completions, one with
        prompt to completions; any other is a 400."""
        body = await read_json(request)
        if isinstance(body, dict) and "messages" in body:
            handler = self.openai.chat
        elif isinstance(body, dict) and "prompt" in body:
            handler = self.openai.completions
        else:
            raise InvalidRequest("Cannot find suitable handler for request. Expected one of: " + _EXPECTED
                                 + " (a body with `messages`, or one with `prompt`)")
        # The handler's read_json takes this body: a 24 MB one was parsed (and its depth walked) twice.
        hand_on(request, body)
        return await handler(request)
