"""Gateway process: every API's routes on the aiohttp app, in the order that decides which of two matching paths
answers (gateway.app makes the app, its middlewares and the server)."""
from __future__ import annotations

from aiohttp import web

from gateway.anthropic import AnthropicRoutes
from gateway.cancel_routes import CancelRoutes
from gateway.capacity import CapacityRoutes
from gateway.chat_input_tokens import ChatInputTokensRoutes
from gateway.config import GatewayConfig
from gateway.engine import Engine
from gateway.kobold_api import KoboldRoutes
from gateway.llama_cpp_python import LlamaCppPythonRoutes
from gateway.llama_cpp_routes import LlamaCppRoutes
from gateway.lmstudio import LMStudioRoutes
from gateway.lmstudio_sdk import LMStudioSdkRoutes
from gateway.lmstudio_v1 import LMStudioV1Routes
from gateway.ollama import OllamaRoutes
from gateway.openai_routes import OpenAIRoutes
from gateway.prefix_cache_routes import PrefixCacheRoutes
from gateway.probe_routes import ProbeRoutes
from gateway.responses import ResponsesRoutes
from gateway.sagemaker import SageMakerRoutes
from gateway.sglang_generate import SGLangGenerateRoutes
from gateway.sglang_info import SGLangInfoRoutes
from gateway.textgen_compat import TextgenCompatRoutes
from gateway.vllm_derender import VLLMDerenderRoutes
from gateway.vllm_generate_tokens import VLLMTokensRoutes
from gateway.vllm_render import VLLMRenderRoutes

VERSION = "0.1.0"


def register_routes(app: web.Application, engine: Engine, config: GatewayConfig) -> None:
    """Every API's routes over one Engine (each translates into GenRequest and back), in this order: a route
    added earlier wins where two paths match."""
    openai_routes = OpenAIRoutes(engine, config)
    openai_routes.register(app)
    # SageMaker's inference route (its /ping is below): /invocations as vLLM routes it.
    SageMakerRoutes(openai_routes).register(app)
    ChatInputTokensRoutes(engine, config).register(app)
    ResponsesRoutes(engine, config).register(app)
    AnthropicRoutes(engine, config).register(app)
    LMStudioRoutes(engine, config, VERSION).register(app)
    LMStudioV1Routes(engine, config).register(app)
    LMStudioSdkRoutes(engine, config).register(app)
    OllamaRoutes(engine, config).register(app)
    LlamaCppRoutes(engine, config, VERSION).register(app)
    LlamaCppPythonRoutes(engine, openai_routes).register(app)
    TextgenCompatRoutes(engine).register(app)
    KoboldRoutes(engine, config).register(app)
    CapacityRoutes(engine).register(app)
    SGLangInfoRoutes(engine, VERSION).register(app)
    SGLangGenerateRoutes(engine, config).register(app)
    CancelRoutes(engine).register(app)
    VLLMTokensRoutes(engine, config).register(app)
    VLLMRenderRoutes(engine, config).register(app)
    VLLMDerenderRoutes(engine, config).register(app)
    PrefixCacheRoutes(engine).register(app)
    ProbeRoutes(engine, VERSION).register(app)
