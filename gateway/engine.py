"""Gateway process: the one generation path every HTTP API (OpenAI, LM Studio, Ollama) translates into and out of."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Optional

from gateway import metrics
from gateway.client import SchedulerClient
from gateway.errors import ApiError, InternalError, Unavailable
from gateway.model import ModelCard
from gateway.offload import run_cpu
from gateway.pipeline import ChoiceOutput, Delta, TokenLogprob  # noqa: F401 - part of the engine API
from proto import pb

log = logging.getLogger("sparkinfer.gateway")


@dataclass
class Sampling:
    """Resolved sampling knobs (request values over generation_config defaults)."""
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: dict = field(default_factory=dict)   # token id -> bias
    min_tokens: int = 0      # generated tokens before eos / stop ids / stop strings may end it (0 = off)


@dataclass
class GenRequest:
    """One generation as the APIs ask for it: prompt ids in, n choices of text out."""
    req_id: str
    prompt_ids: list
    max_tokens: int                      # generated tokens at most (>= 1)
    sampling: Sampling = field(default_factory=Sampling)
    stop: list = field(default_factory=list)           # stop strings (never returned)
    stop_token_ids: list = field(default_factory=list)  # extra stop ids besides the model's eos
    ignore_eos: bool = False
    include_stop: bool = False           # a matched stop string is kept at the end of the output
    n: int = 1
    num_logprobs: Optional[int] = None   # None: no logprobs; k >= 0: sampled token + k alternatives
    split_reasoning: bool = False        # separate <think>...</think> into Delta.reasoning
    thinking_open: bool = False          # the prompt itself ended with an opened <think>
    extra_prompt_ids: list = field(default_factory=list)  # more prompts (legacy completions batch)
    constraint: Optional[object] = None  # gateway.structured.Constraint the output must follow (None = free)

    @property
    def all_prompt_ids(self) -> list:
        return [self.prompt_ids] + list(self.extra_prompt_ids)

    @property
    def num_choices(self) -> int:
        """n choices per prompt; choice index = prompt_index * n + i."""
        return self.n * (1 + len(self.extra_prompt_ids))


@dataclass
class ChoiceResult:
    index: int
    content: str = ""
    reasoning: str = ""
    logprobs: list = field(default_factory=list)
    finish_reason: Optional[str] = None
    stop_reason: Optional[str] = None


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _pb_request(req: GenRequest, index: int) -> "pb.GenerateRequest":
    s = req.sampling
    sampling = pb.SamplingParams(
        temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, min_p=s.min_p,
        has_seed=s.seed is not None, seed=((s.seed or 0) + index % req.n) % (1 << 64),
        presence_penalty=s.presence_penalty, frequency_penalty=s.frequency_penalty,
        repetition_penalty=s.repetition_penalty, logit_bias=dict(s.logit_bias),
        num_logprobs=req.num_logprobs or 0, min_tokens=s.min_tokens)
    prompt_ids = req.all_prompt_ids[index // req.n]
    constraint = None
    if req.constraint is not None:
        constraint = pb.Constraint(kind=req.constraint.kind, grammar=req.constraint.grammar)
    return pb.GenerateRequest(req_id=f"{req.req_id}-{index}", prompt_token_ids=prompt_ids,
                              sampling=sampling, max_tokens=req.max_tokens,
                              stop_token_ids=req.stop_token_ids, ignore_eos=req.ignore_eos, constraint=constraint)


class _Done:
    """Queue marker: one choice finished."""


class Generation:
    """A running request: n scheduler calls feeding one queue of Deltas."""

    def __init__(self, engine: "Engine", req: GenRequest, card: ModelCard):
        self.req = req
        self._engine = engine
        self._card = card
        self._queue: asyncio.Queue = asyncio.Queue()
        self._num_prompt = [len(ids) for ids in req.all_prompt_ids]
        self._usage = Usage(prompt_tokens=sum(self._num_prompt))
        self._generated = [0] * req.num_choices
        self._running = req.num_choices
        self._start = time.monotonic()
        self._first_token_at: Optional[float] = None
        self._closed = False
        metrics.REQUESTS_IN_FLIGHT.inc()
        self._tasks = [asyncio.create_task(self._run_choice(i)) for i in range(req.num_choices)]

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    @property
    def started_at(self) -> float:
        """time.monotonic() when the request was submitted (Ollama / LM Studio timing fields)."""
        return self._start

    @property
    def first_token_at(self) -> Optional[float]:
        """time.monotonic() when the first generated token arrived; None until then."""
        return self._first_token_at

    def usage(self) -> Usage:
        self._usage.completion_tokens = sum(self._generated)
        return self._usage

    async def next(self, timeout: Optional[float] = None) -> Optional[Delta]:
        """The next Delta, None when every choice finished; raises ApiError or asyncio.TimeoutError."""
        while self._running:
            item = await asyncio.wait_for(self._queue.get(), timeout) if timeout else await self._queue.get()
            if isinstance(item, _Done):
                self._running -= 1
                continue
            if isinstance(item, BaseException):
                await self.close()
                raise item
            return item
        return None

    async def close(self) -> None:
        """Cancels every scheduler call still running (idempotent)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if not self._closed:
            self._closed = True
            usage = self.usage()
            metrics.REQUESTS_IN_FLIGHT.dec()
            metrics.PROMPT_TOKENS.inc(usage.prompt_tokens)
            metrics.GENERATION_TOKENS.inc(usage.completion_tokens)

    async def _run_choice(self, index: int) -> None:
        stream = None
        try:
            # Inside the try: a request that cannot even be built must fail the choice, never leave it hanging.
            stream = self._engine.client.generate(_pb_request(self.req, index))
            await self._consume(index, stream)
            self._queue.put_nowait(_Done())
        except ApiError as exc:
            self._queue.put_nowait(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug here must surface as a 500, not a hang
            log.exception("choice %d of %s failed", index, self.req.req_id)
            self._queue.put_nowait(InternalError(f"gateway error while generating: {exc!r}"))
        finally:
            if stream is not None:
                stream.cancel()

    async def _consume(self, index: int, stream) -> None:
        out = ChoiceOutput(index, self.req, self._card)
        while True:
            message = await stream.next()
            if message is None:
                raise Unavailable("the scheduler ended the request without a finish reason")
            self._account(index, message)
            finish = message.finish_reason or None
            if finish == "abort":
                raise Unavailable("the request was aborted by the model server (worker lost?)")
            delta = out.push(message, finish)
            if delta is not None:
                self._queue.put_nowait(delta)
            if delta is not None and delta.finish_reason:
                if delta.stop_reason is not None and not finish:
                    # A stop string ended it here, not the scheduler: say so before _run_choice cancels the call.
                    await stream.finish("stop")
                self._engine.record_finish(self, delta.finish_reason)
                return

    def _account(self, index: int, message) -> None:
        if message.num_prompt_tokens and index % self.req.n == 0:
            self._num_prompt[index // self.req.n] = message.num_prompt_tokens
            self._usage.prompt_tokens = sum(self._num_prompt)
        if message.num_cached_tokens:
            self._usage.cached_tokens = message.num_cached_tokens
        counted = self._generated[index] + len(message.token_ids)
        self._generated[index] = max(counted, message.num_generated_tokens)
        if message.token_ids and self._first_token_at is None:
            self._first_token_at = time.monotonic()
            metrics.TTFT.observe(self._first_token_at - self._start)


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
        try:
            while (delta := await gen.next()) is not None:
                result = results[delta.index]
                result.content += delta.content
                result.reasoning += delta.reasoning
                result.logprobs.extend(delta.logprobs)
                if delta.finish_reason:
                    result.finish_reason, result.stop_reason = delta.finish_reason, delta.stop_reason
        finally:
            await gen.close()
        return results, gen.usage()

    def record_finish(self, gen: Generation, finish_reason: str) -> None:
        metrics.REQUEST_SUCCESS.labels(finished_reason=finish_reason).inc()
        metrics.E2E_LATENCY.observe(gen.elapsed())
