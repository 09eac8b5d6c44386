"""Gateway process: LM Studio /api/v1 answers: the model list entry, the chat result and its SSE event stream.

Shapes as LM Studio 0.4 documents them (lmstudio.ai/docs/developer/rest: list, chat, streaming-events): a chat's
`output` is a reasoning item (when the model reasoned) then a message item, with `stats`; streamed, named events
(chat.start, prompt_processing.*, reasoning.*, message.*, error) end with chat.end carrying that same result.
"""
from __future__ import annotations

import time
from typing import Callable, Optional

from gateway import json_out
from gateway.engine import Delta, Generation, Usage
from gateway.errors import ApiError
from gateway.lmstudio_shape import event_error_type, publisher
from gateway.model import ModelCard
from gateway.ollama_models import arch_family, model_details, model_size
from gateway.openai_shape import SSE_HEADERS
from gateway.stream import SseFramer
from gateway.text_parts import TextParts

_BITS_PER_WEIGHT = {"bf16": 16, "fp16": 16, "f16": 16, "fp32": 32, "f32": 32, "fp8": 8, "nvfp4": 4.5}


def reasoning_options(card: ModelCard) -> list:
    """The reasoning settings the chat template honours: "off" needs its enable_thinking switch (a template that
    always thinks has none), low/medium/high its reasoning_effort; none for a model without a reasoning mode."""
    if not card.thinks:
        return []
    source = card.chat_template_source or ""
    options = (["off"] if "enable_thinking" in source else []) + ["on"]
    return options + (["low", "medium", "high"] if "reasoning_effort" in source else [])


def load_config(card: ModelCard, load) -> dict:
    """The load fields LM Studio documents for an LLM instance (docs developer/rest load.md load_config) that apply
    here: context_length, and offload_kv_cache_to_gpu, whether the KV cache is in GPU memory (the worker's device,
    left out when the scheduler does not say). eval_batch_size, flash_attention and num_experts are left out, as
    LM Studio leaves out the ones that did not apply."""
    config = {"context_length": card.max_context_len}
    if load.device:
        config["offload_kv_cache_to_gpu"] = not load.device.startswith("cpu")
    return config


def instance_config(card: ModelCard, load) -> dict:
    """A loaded instance's config in /api/v1/models (docs developer/rest list.md loaded_instances[].config):
    load_config plus parallel, the predictions the instance runs at once (the scheduler's max_num_seqs), which
    clients read to size their concurrency."""
    config = load_config(card, load)
    if load.max_num_seqs > 0:
        config["parallel"] = load.max_num_seqs
    return config


def model_entry(card: ModelCard, served_name: str, load) -> dict:
    """One /api/v1/models entry, `load` the scheduler's pb.LoadResponse while the instance is listed as loaded;
    loaded_instances is empty when it is None (no worker runs the model, or a client unloaded it)."""
    quant = (card.quantization or "").lower()
    capabilities = {"vision": False, "trained_for_tool_use": card.takes_tools}
    if card.thinks:
        capabilities["reasoning"] = {"allowed_options": reasoning_options(card), "default": "on"}
    # An instance per served name (SPARKINFER_SERVED_MODEL_NAME's aliases too), as LM Studio lists the instances of
    # one model loaded under several identifiers (lms load --identifier).
    instances = [] if load is None else [{"id": identifier, "config": instance_config(card, load)}
                                         for identifier in (served_name, *card.served_aliases)]
    return {"type": "llm", "publisher": publisher(card, served_name), "key": served_name,
            "display_name": served_name.rsplit("/", 1)[-1], "architecture": arch_family(card.architecture),
            "quantization": {"name": quant.upper() or None, "bits_per_weight": _BITS_PER_WEIGHT.get(quant)},
            "size_bytes": model_size(card), "params_string": model_details(card)["parameter_size"],
            "loaded_instances": instances, "max_context_length": card.max_context_len,
            # LM Studio's formats are "gguf" and "mlx"; a safetensors checkpoint is neither.
            "format": None, "capabilities": capabilities, "description": None}


def chat_result(model: str, reasoning: str, content: str, stats: dict, response_id: Optional[str] = None) -> dict:
    """The /api/v1/chat answer (and chat.end's result), with response_id when the chat was stored."""
    output = [{"type": "reasoning", "content": reasoning}] if reasoning else []
    if content or not output:
        output.append({"type": "message", "content": content})
    result = {"model_instance_id": model, "output": output, "stats": stats}
    if response_id is not None:
        result["response_id"] = response_id
    return result


def chat_stats(usage: Usage, num_reasoning: int, received: float, first_token: Optional[float],
               finished: float, loaded: bool = False) -> dict:
    """LM Studio's /api/v1/chat stats: input / output / reasoning token counts, tokens_per_second over the generating
    time (first token to finish, 0 when none) and time_to_first_token_seconds; times are time.monotonic() seconds.
    `loaded`: the chat loaded the model (listed unloaded before it), which LM Studio reports as
    model_load_time_seconds, present only then (docs chat.md); it is 0 here, the model never left memory."""
    first = finished if first_token is None else first_token
    generating = max(finished - first, 0.0)
    speed = usage.completion_tokens / generating if generating > 0 and usage.completion_tokens else 0.0
    stats = {"input_tokens": usage.prompt_tokens, "total_output_tokens": usage.completion_tokens,
             "reasoning_output_tokens": min(num_reasoning, usage.completion_tokens),
             "tokens_per_second": round(speed, 3), "time_to_first_token_seconds": round(max(first - received, 0), 6)}
    if loaded:
        stats["model_load_time_seconds"] = 0.0
    return stats


def sse_named(payload: dict) -> bytes:
    """An SSE event named by its payload's type."""
    return b"event: " + payload["type"].encode() + b"\ndata: " + json_out.event_dumps(payload) + b"\n\n"


class V1ChatFramer(SseFramer):
    """The /api/v1/chat event stream: each block (reasoning, message) opened, fed deltas and closed in order."""
    content_type = "text/event-stream; charset=utf-8"
    headers = SSE_HEADERS

    def __init__(self, card: ModelCard, model: str, gen: Generation, received: float,
                 keep: Callable[[str, str], Optional[str]] = lambda reasoning, content: None, loaded: bool = False):
        self.card, self.model, self.gen, self.received = card, model, gen, received
        self.keep = keep     # stores the finished chat (reasoning, content), giving its response_id
        self.loaded = loaded     # the chat loaded the model (it was listed unloaded): the model_load events
        self.reasoning, self.content = TextParts(), TextParts()
        self.num_reasoning = 0   # thinking tokens generated (Delta.num_reasoning_tokens)
        self._block: Optional[str] = None       # the open block: "reasoning" or "message"
        self._prompt_done = False

    def start(self, usage: Usage) -> list[bytes]:
        """LM Studio's chat.start (model_instance_id), model_load.start and .end when the chat loaded the model (as
        LM Studio's JIT load sends them, docs streaming-events), and prompt_processing.start events."""
        events = [sse_named({"type": "chat.start", "model_instance_id": self.model})]
        if self.loaded:
            events += [sse_named({"type": "model_load.start", "model_instance_id": self.model}),
                       sse_named({"type": "model_load.end", "model_instance_id": self.model,
                                  "load_time_seconds": 0.0})]
        return events + [sse_named({"type": "prompt_processing.start"})]

    def _prompt_end(self) -> list[bytes]:
        """prompt_processing.end, once: before the first text, or before chat.end when no text came."""
        if self._prompt_done:
            return []
        self._prompt_done = True
        return [sse_named({"type": "prompt_processing.end"})]

    def _events(self, block: str, text: str) -> list[bytes]:
        if not text:
            return []
        events = self._close() if self._block not in (None, block) else []
        events += self._prompt_end()
        if self._block != block:
            self._block = block
            events.append(sse_named({"type": f"{block}.start"}))
        return events + [sse_named({"type": f"{block}.delta", "content": text})]

    def _close(self) -> list[bytes]:
        block, self._block = self._block, None
        return [sse_named({"type": f"{block}.end"})] if block else []

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """reasoning.* and message.* events for the Delta's reasoning and content (a kind's start event when it
        begins, the other kind closed first)."""
        self.reasoning.add(delta.reasoning)
        self.content.add(delta.content)
        self.num_reasoning = delta.num_reasoning_tokens
        return self._events("reasoning", delta.reasoning) + self._events("message", delta.content)

    def _result(self, usage: Usage, finished: bool = False) -> dict:
        stats = chat_stats(usage, self.num_reasoning, self.received, self.gen.first_token_at, time.monotonic(),
                           self.loaded)
        reasoning, content = str(self.reasoning), str(self.content)
        response_id = self.keep(reasoning, content) if finished else None
        return chat_result(self.model, reasoning, content, stats, response_id)

    def end(self, usage: Usage) -> list[bytes]:
        """The open reasoning / message closed, prompt_processing.end, then chat.end with the result and stats (and
        the stored chat's response_id)."""
        result = self._result(usage, finished=True)
        return self._close() + self._prompt_end() + [sse_named({"type": "chat.end", "result": result})]

    def error(self, error: ApiError, usage: Usage) -> list[bytes]:
        """As LM Studio documents it: the open events closed, an `error` event, then chat.end with what was
        generated."""
        # As LM Studio documents it: the error event, then chat.end with whatever was generated.
        body = {"type": event_error_type(error), "message": error.message, "code": error.code, "param": error.param}
        return self._close() + [sse_named({"type": "error", "error": body}),
                                sse_named({"type": "chat.end", "result": self._result(usage)})]
