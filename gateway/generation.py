"""Gateway process: one running request, its n scheduler calls (one per choice) feeding one queue of Deltas."""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Callable, Optional

from gateway import metrics
from gateway.choice_calls import ChoiceCalls, _Done
from gateway.delta_queue import DeltaQueue, unfold
from gateway.errors import ApiError
from gateway.gen_request import ChoiceProgress, GenRequest, Usage
from gateway.model import ModelCard
from gateway.pipeline import Delta

if TYPE_CHECKING:
    from gateway.engine import Engine

# Generation.next after wake(): no Delta, the caller's alarm rang.
NOT_READY = object()
_AGAIN = object()
_WAKE = object()
_timeout = getattr(asyncio, "timeout", None)   # Python 3.11+


async def _get(queue: asyncio.Queue, timeout: Optional[float]):
    """queue.get(), raising asyncio.TimeoutError after timeout s (none: no limit). asyncio.timeout (Python 3.11) where
    there is one: asyncio.wait_for wraps the get in a Task of its own (3.12 made wait_for this)."""
    if not timeout:
        return await queue.get()
    if _timeout is None:
        return await asyncio.wait_for(queue.get(), timeout)
    async with _timeout(timeout):
        return await queue.get()


class Generation(ChoiceCalls):
    """A running request: n scheduler calls (ChoiceCalls: gateway/choice_calls.py) feeding one queue of Deltas."""

    def __init__(self, engine: "Engine", req: GenRequest, card: ModelCard, first_task_id: int = 0):
        self.req = req
        self.first_task_id = first_task_id   # choice i's task id is first_task_id + i (running_choices)
        self._engine = engine
        self._card = card
        self._queue: asyncio.Queue = DeltaQueue()
        self._num_prompt = [len(ids) for ids in req.all_prompt_ids]
        # Per prompt, like _num_prompt: what its first choice (the one prompt_tokens counts) took from the prefix cache.
        self._num_cached = [0] * len(req.all_prompt_ids)
        self._usage = Usage(prompt_tokens=sum(self._num_prompt))
        self._generated = [0] * req.num_choices
        self._new_line = [False] * req.num_choices   # per choice, a newline was in its text so far
        self._sent = [0] * req.num_choices   # per choice, the num_tokens of its last Delta handed out by next()
        # Per choice: heard from the scheduler (its prompt was prefilled), and ended (a finish reason or an error).
        self._heard = [False] * req.num_choices
        self._ended = [False] * req.num_choices
        self._running = req.num_choices
        self._start = time.monotonic()
        self._first_token_at: Optional[float] = None
        self._choice_first_at: list = [None] * req.num_choices   # per choice, time.monotonic() of its first token
        self._last_token_at: list = [None] * req.num_choices    # per choice, time.monotonic() of its latest token
        self._queue_time = 0.0
        self._closed = False
        # Choices the scheduler admitted (or, from one that does not say so, answered); set once all were, or one
        # failed.
        self._admitted = [False] * req.num_choices
        self._sent_call = [False] * req.num_choices   # per choice, its Generate call was made
        self._outputs: list = [None] * req.num_choices  # per choice, its ChoiceOutput once its call reads messages
        self._num_started = 0
        self._all_started = asyncio.Event()
        self._error: Optional[ApiError] = None
        metrics.REQUESTS_IN_FLIGHT.inc()
        self._tasks = [asyncio.create_task(self._run_choice(i)) for i in range(req.num_choices)]

    def elapsed(self) -> float:
        """Seconds since the request was submitted."""
        return time.monotonic() - self._start

    @property
    def started_at(self) -> float:
        """time.monotonic() when the request was submitted (Ollama / LM Studio timing fields)."""
        return self._start

    @property
    def first_token_at(self) -> Optional[float]:
        """time.monotonic() when the first generated token arrived; None until then."""
        return self._first_token_at

    @property
    def queue_time(self) -> float:
        """Seconds the scheduler kept choice 0 waiting for a seat before its first step (0 until it answered)."""
        return self._queue_time

    @property
    def closed(self) -> bool:
        """Whether close() ran: its scheduler calls are cancelled and it is accounted for."""
        return self._closed

    @property
    def admitted(self) -> bool:
        """Whether the scheduler admitted every choice (a background Response is `queued` until then)."""
        return all(self._admitted)

    def usage(self) -> Usage:
        """The whole request's usage, with each prompt's own (prompt_tokens, cached_tokens): a several-prompt answer
        (/generate's meta_info, /completion's timings.cache_n) counts its prompt's hits, not the request's sum."""
        self._usage.completion_tokens = sum(self._generated)
        self._usage.per_prompt = list(zip(self._num_prompt, self._num_cached))
        return self._usage

    def running_choices(self) -> list:
        """ChoiceProgress of each choice a seat holds now: admitted and not ended (none once the request is closed)."""
        if self._closed:
            return []
        return [self._progress(index) for index in range(self.req.num_choices)
                if self._admitted[index] and not self._ended[index]]

    def _progress(self, index: int, done: bool = False) -> ChoiceProgress:
        prompt = index // self.req.n
        return ChoiceProgress(self.first_task_id + index, self.req, index, self._num_prompt[prompt],
                              self._num_cached[prompt], self._heard[index], self._generated[index],
                              self._new_line[index], done)

    def sent_usage(self) -> Usage:
        """Usage as of the Deltas next() has handed out: the tokens behind the text sent so far (the choices' calls
        run ahead of a stream's writer; continuous usage must not count tokens whose chunks are still queued)."""
        return Usage(self._usage.prompt_tokens, sum(self._sent), self._usage.cached_tokens,
                     list(zip(self._num_prompt, self._num_cached)))

    async def next(self, timeout: Optional[float] = None) -> Optional[Delta]:
        """The next Delta, None when every choice finished (NOT_READY after wake()); raises ApiError or
        asyncio.TimeoutError."""
        while self._running:
            # One already queued is taken without a wait: asyncio.wait_for made a Task and a timer for every token.
            item = self._queue.get_nowait() if not self._queue.empty() else await _get(self._queue, timeout)
            item = unfold(item)
            if (delta := await self._take(item)) is not _AGAIN:
                return delta
        return None

    def wake(self) -> None:
        """Makes next() return NOT_READY once, now if it waits: a stream's keep-alive alarm, one timer a keep-alive
        period instead of a timeout on every token's wait (http_stream._pump)."""
        self._queue.put_nowait(_WAKE)

    async def _take(self, item):
        """The Delta a queue item stands for; _AGAIN for a choice's end, NOT_READY for a wake(); raises the error of a
        failed choice."""
        if item is _WAKE:
            return NOT_READY
        if isinstance(item, _Done):
            self._running -= 1
            return _AGAIN
        if isinstance(item, BaseException):
            await self.close()
            raise item
        self._sent[item.index] = max(self._sent[item.index], item.num_tokens)
        return item

    async def drain(self, on_delta: Callable[[Delta], None]) -> None:
        """Feeds every Delta to on_delta until every choice finished (a non-streamed answer); the scheduler calls are
        closed on the way out, also when the caller is cancelled or a choice fails."""
        try:
            while (delta := await self.next()) is not None:
                on_delta(delta)
        finally:
            await self.close()

    async def wait_started(self, timeout: float) -> None:
        """Waits (up to timeout s) until the scheduler admitted every choice; raises the first choice's error, so
        that with n > 1 a refused choice (429 on a short queue) fails the whole request before any of it is sent
        (the other choices are cancelled)."""
        try:
            await asyncio.wait_for(self._all_started.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        if self._error is not None:
            await self.close()
            raise self._error

    async def close(self) -> None:
        """Cancels every scheduler call still running (idempotent)."""
        for task in self._tasks:
            task.cancel()
        # Counted before the wait: the caller can be cancelled during it (a client that left makes a write fail, then
        # aiohttp cancels the handler that is closing), and the request must leave requests_in_flight all the same.
        if not self._closed:
            self._closed = True
            metrics.REQUESTS_IN_FLIGHT.dec()
            for ended, sent in zip(self._ended, self._sent_call):
                # Cancelled: its client left (or a sibling choice failed). vLLM counts it as "abort". One whose call
                # was never sent counts none, as in the scheduler, which never had it (vLLM counts from its engine's
                # outputs only); one sent counts even before the scheduler's admission reached here, as the
                # scheduler admits a call as it takes it.
                if not ended and sent:
                    self._engine.record_finish(self, "abort")
            self._engine.load_state.release()
            metrics.observe_prompts(self.req.n, self._generated, self._admitted)
            # The choices a seat ran: GET /slots states the latest as its idle seats' last tasks.
            self._engine.remember_finished([self._progress(index, done=True) for index in range(self.req.num_choices)
                                            if self._admitted[index] and self._heard[index]])
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def abort(self, error: ApiError) -> None:
        """Ends every choice still running with `error` (the gateway's drain grace is over): the scheduler calls are
        cancelled, and the reader gets the error after the text it already has, as after a worker lost mid-stream."""
        if self._closed:
            return
        for index, task in enumerate(self._tasks):
            if not self._ended[index]:
                task.cancel()
                self._fail(index, error, "abort")

    def cancel(self, indices: Optional[list] = None) -> list:
        """Ends these choices (None: all) that still run with finish_reason "abort", their text so far kept (the text,
        ids and logprobs their ChoiceOutput held back too: ChoiceOutput.end), as vLLM's abort of a request by id and
        SGLang's /abort_request end theirs; returns the choices it ended."""
        ended = [i for i in (range(len(self._tasks)) if indices is None else indices)
                 if not self._closed and not self._ended[i]]
        for index in ended:
            self._tasks[index].cancel()
            self._ended[index] = True
            self._engine.record_finish(self, "abort")
            out = self._outputs[index]
            delta = out.end("abort") if out is not None else Delta(index, finish_reason="abort")
            delta.num_tokens = self._generated[index]
            self._queue.put_nowait(delta)
            self._queue.put_nowait(_Done())
            if not self._admitted[index]:
                self._started(index)
        return ended
