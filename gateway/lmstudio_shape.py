"""Gateway process: LM Studio /api/v0 extras (model object, stats, model_info, runtime) built from engine results."""
from __future__ import annotations

import copy
import platform
from typing import Optional

from gateway.errors import ApiError, ContextLengthExceeded, InvalidRequest
from gateway.model import ModelCard
from gateway.ollama_models import arch_family

FORMAT = "safetensors"
# /api/v0's compatibility_type takes LM Studio's two values only, "gguf" and "mlx" (a safetensors checkpoint with its
# config.json, the layout served here, is "mlx" there); Zed's LM Studio provider reads it as that closed enum and lists
# no model at all when the value is anything else.
COMPATIBILITY_TYPE = "mlx"


def publisher(card: ModelCard, served_name: str = "") -> str:
    """The org part of the served "org/name" id (the one shown as `id`), else of the checkpoint's id, else this
    server's name."""
    for model_id in (served_name, card.model_id):
        if "/" in model_id and model_id.split("/", 1)[0]:
            return model_id.split("/", 1)[0]
    return "sparkinfer"


def model_object(card: ModelCard, served_name: str, loaded: bool = True) -> dict:
    """LM Studio's model entry; `state` is "not-loaded" (and no loaded_context_length) while no worker runs it."""
    entry = {"id": served_name, "object": "model", "type": "llm", "publisher": publisher(card, served_name),
             "arch": arch_family(card.architecture), "compatibility_type": COMPATIBILITY_TYPE,
             "quantization": card.quantization or "unknown", "state": "loaded" if loaded else "not-loaded",
             "max_context_length": card.max_context_len}
    if loaded:
        entry["loaded_context_length"] = card.max_context_len
    if card.takes_tools:
        # LM Studio lists this for a model trained for tool use; clients (llm-lmstudio) offer tools only then.
        entry["capabilities"] = ["tool_use"]
    return entry


def model_info(card: ModelCard) -> dict:
    """LM Studio's model_info object of a /api/v0 answer: arch, quant (unknown when not quantized), format,
    context_length."""
    return {"arch": arch_family(card.architecture), "quant": card.quantization or "unknown", "format": FORMAT,
            "context_length": card.max_context_len}


def runtime(version: str) -> dict:
    """LM Studio's runtime object of a /api/v0 answer: this server's name by OS and machine, its version, the formats it
    loads."""
    return {"name": f"sparkinfer-{platform.system().lower()}-{platform.machine().lower()}", "version": version,
            "supported_formats": [FORMAT]}


def stop_reason(finish_reason: Optional[str], matched_stop: Optional[str], num_tokens: int,
                max_context_len: int) -> str:
    """LM Studio's LLMPredictionStopReason for an OpenAI finish_reason."""
    if finish_reason == "tool_calls":
        return "toolCalls"
    if finish_reason == "length":
        return "contextLengthReached" if num_tokens >= max_context_len else "maxPredictedTokensReached"
    if finish_reason == "stop":
        return "stopStringFound" if matched_stop else "eosFound"
    return "failed"


def stats(num_generated: int, received: float, first_token: Optional[float], finished: float,
          reason: str) -> dict:
    """tokens_per_second, time_to_first_token (s), generation_time (s), stop_reason; times from monotonic seconds."""
    first = finished if first_token is None else first_token
    generation_time = max(finished - first, 0.0)
    tps = num_generated / generation_time if generation_time > 0 and num_generated else 0.0
    return {"tokens_per_second": round(tps, 3), "time_to_first_token": round(max(first - received, 0.0), 6),
            "generation_time": round(generation_time, 6), "stop_reason": reason}


def context_overflow_message(num_prompt: int, n_ctx: int, at_least: bool = False) -> str:
    """LM Studio's words for a prompt that does not fit the loaded context (its llama.cpp engine's n_keep check),
    which clients match ("greater than the context length": pi's and opencode's overflow patterns); `at_least` when
    the count is a lower bound, counted before tokenizing."""
    return (f"The number of tokens to keep from the initial prompt is greater than the context length (n_keep: "
            f"{'at least ' if at_least else ''}{num_prompt}>= n_ctx: {n_ctx}). Try to load the model with a larger "
            f"context length, or provide a shorter input.")


def event_error_type(error: ApiError) -> str:
    """LM Studio's error type of an /api/v1 error, in its body and in a stream's error event (docs developer/rest
    streaming-events: invalid_request, unknown, mcp_connection_error, plugin_connection_error, not_implemented,
    model_not_found, job_not_found, internal_error); its server answers a bad /api/v1/chat body with
    {"error": {"message", "type": "invalid_request", "code", "param"}} (lmstudio-ai/docs#253)."""
    if error.code == "job_not_found":
        return "job_not_found"
    if error.status == 404:
        return "model_not_found"
    if error.status == 501:
        return "not_implemented"
    if 400 <= error.status < 500:
        return "invalid_request"
    return "internal_error" if error.status >= 500 else "unknown"


def lmstudio_error(error: ApiError, native: bool = False, path: str = "") -> ApiError:
    """error as LM Studio's /api/v0 and /api/v1 (`native`) word it: a prompt past the context in its words (an
    explicit output limit never overflows there: max_tokens is a cap), a chat or completion (`path`) naming a model
    it does not serve its 400 'Invalid model identifier' (invalid_model), on /api/v1 typed with LM Studio's own
    types (its /api/v0 keeps OpenAI's), anything else as it is."""
    if isinstance(error, ContextLengthExceeded) and error.ctx is not None and error.num_output is None:
        error.message = context_overflow_message(error.num_prompt, error.ctx, error.at_least)
    if not native and path.startswith(("/api/v0/chat/", "/api/v0/completions")):
        error = invalid_model(error)
    if native:
        error = copy.copy(error)
        error.type = event_error_type(error)
    return error


def invalid_model(error: ApiError) -> ApiError:
    """An unknown model (openai_plan.check_model's 404, which names it) as LM Studio answers a chat or completion
    naming it: 400 invalid_request_error 'Invalid model identifier "x". Please specify a valid downloaded model
    (e.g., ...).', code model_not_found (its users quote it: assafelovic/gpt-researcher#1556,
    continuedev/continue#12757); any other error as it is."""
    requested = getattr(error, "requested", None)
    if requested is None:
        return error
    return InvalidRequest(f'Invalid model identifier "{requested}". Please specify a valid downloaded model (e.g., '
                          f'{error.served_name}).', param="model", code="model_not_found")
