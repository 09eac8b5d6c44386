"""Gateway process: Ollama NDJSON framing of a generation, and the non-streamed answer built from the same pieces."""
from __future__ import annotations

import time
from typing import Optional

from gateway.engine import Delta, Generation, Usage
from gateway.errors import ApiError
from gateway.model import ModelCard
from gateway.ollama_request import OllamaPlan
from gateway.ollama_models import created_at
from gateway.openai_shape import SSE_HEADERS
from gateway.ollama_shape import (NDJSON_CONTENT_TYPE, OllamaOutput, Piece, chunk, durations_ns, final, final_metrics,
                                  ndjson_line)

def metrics_for(gen: Generation, received: float, usage: Usage) -> dict:
    """Ollama's count and duration fields for a finished generation."""
    now = time.monotonic()
    return final_metrics(usage, durations_ns(received, gen.started_at, gen.first_token_at, now, now, gen.queue_time))


class NdjsonFramer:
    """Ollama stream: one done:false object per piece, each tool call in an object as soon as it is whole (the
    ones read together share one), then done:true."""
    content_type = NDJSON_CONTENT_TYPE
    headers = SSE_HEADERS

    def __init__(self, plan: OllamaPlan, card: ModelCard, gen: Generation, chat: bool, received: float):
        self.plan, self.gen, self.chat, self.received = plan, gen, chat, received
        self.out = OllamaOutput(plan, card)

    def start(self, usage: Usage) -> list[bytes]:
        """Nothing: Ollama's first line carries the first text."""
        return []

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """The NDJSON line of a Delta (message or response, thinking, logprobs); a tool call travels on a line of its
        own, as Ollama sends it."""
        piece = self.out.push(delta)
        if piece.empty:
            return []
        stamp = created_at()
        if piece.tool_calls and (piece.content or piece.thinking or piece.logprobs):
            # A tool call travels alone in its own object, as Ollama sends it.
            calls, piece.tool_calls = piece.tool_calls, None
            return [ndjson_line(chunk(self.plan, self.chat, piece, stamp)),
                    ndjson_line(chunk(self.plan, self.chat, Piece(tool_calls=calls), stamp))]
        return [ndjson_line(chunk(self.plan, self.chat, piece, stamp))]

    def end(self, usage: Usage) -> list[bytes]:
        """The final line: done, done_reason and the duration and count metrics (ns)."""
        metrics = metrics_for(self.gen, self.received, usage)
        return [ndjson_line(final(self.plan, self.chat, Piece(), self.out, metrics, created_at()))]

    def error(self, error: ApiError, usage: Usage) -> list[bytes]:
        """Ollama's mid-stream failure: an {"error": message} line."""
        # Headers are sent: Ollama reports a mid-stream failure as an {"error": ...} line.
        return [ndjson_line({"error": error.message})]

    def keepalive(self) -> Optional[bytes]:
        """None: Ollama sends nothing on a silent stream."""
        return None


async def complete(plan: OllamaPlan, card: ModelCard, gen: Generation, chat: bool, received: float) -> dict:
    """Runs gen to the end and returns the single done:true object (cancels gen if the caller is cancelled)."""
    out = OllamaOutput(plan, card)
    whole = Piece()

    def absorb(delta) -> None:
        piece = out.push(delta)
        whole.content += piece.content
        whole.thinking += piece.thinking
        whole.logprobs.extend(piece.logprobs)
        if piece.tool_calls:
            whole.tool_calls = (whole.tool_calls or []) + piece.tool_calls

    await gen.drain(absorb)
    metrics = metrics_for(gen, received, gen.usage())
    return final(plan, chat, whole, out, metrics, created_at())
