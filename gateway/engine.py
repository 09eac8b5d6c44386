"""Gateway process: the one generation path every HTTP API (OpenAI, LM Studio, Ollama) translates into and out of."""
from __future__ import annotations

import asyncio
from typing import Optional

from gateway import metrics
from gateway.client import SchedulerClient
from gateway.errors import ApiError
from gateway.gen_request import ChoiceResult, GenRequest, Sampling, Usage  # noqa: F401 - part of the engine API
from gateway.generation import Generation
from gateway.model import ModelCard
from gateway.offload import run_cpu
from gateway.pipeline import Delta, TokenLogprob  # noqa: F401 - part of the engine API


class Engine:
    """The gateway's view of one scheduler: model card (cached Info) plus generation.

    Use: build a GenRequest, `gen = await engine.start(req)`, then `await gen.next(timeout)` yields
    Delta objects (one per emitted piece, any choice) until None; `gen.usage()` gives token counts;
    `await gen.close()` cancels every scheduler call (client gone). `await engine.complete(req)` runs
    it to the end and returns (per-choice results, usage) for non-streamed responses.
    """

    def __init__(self, client: Optional[SchedulerClient] = None):
        self.client = client
        self._card: Optional[ModelCard] = None
        self._card_lock = asyncio.Lock()

    async def card(self) -> ModelCard:
        """The model card; fetched from the scheduler on first use. Raises Unavailable."""
        if self._card is None:
            async with self._card_lock:
                if self._card is None:
                    info = await self.client.info()
                    # Parsing the tokenizer and scanning its vocabulary takes a while: not on the loop.
                    self._card = await run_cpu(ModelCard.from_info, info)
        return self._card

    async def model_loaded(self, timeout: float = 2.0) -> bool:
        """Whether the model can generate now: the scheduler answers and has a live worker (what /api/ps and
        LM Studio's model `state` report; the card alone is cached and outlives a dead worker)."""
        try:
            load = await self.client.load(timeout=timeout)
        except ApiError:
            return False
        return bool(load.worker_alive)

    async def start(self, req: GenRequest) -> Generation:
        return Generation(self, req, await self.card())

    async def complete(self, req: GenRequest) -> tuple[list[ChoiceResult], Usage]:
        """Runs a request to the end; cancels the scheduler calls if the caller is cancelled."""
        gen = await self.start(req)
        results = [ChoiceResult(i) for i in range(req.num_choices)]
        await gen.drain(lambda delta: results[delta.index].absorb(delta))
        return results, gen.usage()

    def record_finish(self, gen: Generation, finish_reason: str) -> None:
        metrics.REQUEST_SUCCESS.labels(finished_reason=finish_reason).inc()
        metrics.E2E_LATENCY.observe(gen.elapsed())
