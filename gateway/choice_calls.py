"""Gateway process: the scheduler-call half of a running request (gateway/generation.Generation): each choice's
Generate call, its messages accounted and turned into Deltas on the request's queue."""
from __future__ import annotations

import asyncio
import logging
import time

from gateway import metrics
from gateway.errors import ApiError, InternalError, Unavailable
from gateway.gen_wire import generate_request
from gateway.metrics_llama_cpp import LLAMA_CPP
from gateway.pipeline import ChoiceOutput

log = logging.getLogger("sparkinfer.gateway")


class _Done:
    """Queue marker: one choice finished."""


class ChoiceCalls:
    """Generation's scheduler side: one task a choice runs _run_choice, feeding Generation's queue; the state it
    reads and writes (_queue, _generated, _new_line, _ended, _admitted, the usage and timing fields) is set in
    Generation.__init__."""

    async def _run_choice(self, index: int) -> None:
        stream = None
        try:
            # Inside the try: a request that cannot even be built must fail the choice, never leave it hanging.
            stream = self._engine.client.generate(generate_request(self.req, index))
            self._sent_call[index] = True
            await self._consume(index, stream)
            self._queue.put_nowait(_Done())
        except ApiError as exc:
            self._fail(index, exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug here must surface as a 500, not a hang
            log.exception("choice %d of %s failed", index, self.req.req_id)
            self._fail(index, InternalError(f"gateway error while generating: {exc!r}"))
        finally:
            if stream is not None:
                stream.cancel()

    def _fail(self, index: int, error: ApiError, finish_reason: str = "error") -> None:
        self._ended[index] = True
        if self._admitted[index]:
            # Admitted, then failed (worker lost, a step failed): counted once as "error", as the scheduler counts it
            # (vLLM's FinishReason.ERROR); cut by the drain, "abort". A refusal (429, 400) never started and counts
            # none, as in the scheduler's request_success.
            self._engine.record_finish(self, finish_reason)
        self._error = self._error or error
        self._queue.put_nowait(error)
        self._all_started.set()

    def _started(self, index: int) -> None:
        self._admitted[index] = True
        self._num_started += 1
        if self._num_started == self.req.num_choices:
            self._all_started.set()

    async def _consume(self, index: int, stream) -> None:
        out = self._outputs[index] = ChoiceOutput(index, self.req, self._card)
        # Started once admitted: a choice queued behind others must not hold back the first chunk of its siblings
        # (a streamed n = 3 answer sent nothing for 6.5 s while choice 0 was generating). A scheduler that does not
        # say it admitted a request says so with its first message.
        admitted = await stream.admitted()
        if admitted:
            self._started(index)
        message = await stream.next()
        if not admitted:
            self._started(index)
        while True:
            if message is None:
                raise Unavailable("the scheduler ended the request without a finish reason")
            self._account(index, message)
            finish = message.finish_reason or None
            if finish == "abort":
                raise Unavailable("the request was aborted by the model server (worker lost?)")
            if finish is None and self._out_of_time(index, message):
                finish = "length"
            delta = out.push(message, finish)
            if delta is not None:
                delta.num_tokens = self._generated[index]
                self._new_line[index] = self._new_line[index] or "\n" in delta.content or "\n" in delta.reasoning
                self._queue.put_nowait(delta)
            if delta is not None and delta.finish_reason:
                # Ended before the Finish call's wait: a cancel by id then must not give the choice a second finish.
                self._ended[index] = True
                self._engine.record_finish(self, delta.finish_reason)
                if not message.finish_reason:
                    # A stop string or the time limit ended it here, not the scheduler: say so before _run_choice
                    # cancels the call.
                    await stream.finish(delta.finish_reason)
                return
            message = await stream.next()

    def _out_of_time(self, index: int, message) -> bool:
        """llama.cpp's t_max_predict_ms: the choice's time since its first token is past the limit and this message's
        text holds a newline (llama.cpp stops only on a newline, keeping it)."""
        first_at, limit = self._choice_first_at[index], self.req.max_predict_s
        if limit is None or first_at is None or not message.token_ids or time.monotonic() - first_at <= limit:
            return False
        return "\n" in self._card.decode(list(message.token_ids), False)

    def _account(self, index: int, message) -> None:
        if index == 0 and not self._heard[0]:
            self._queue_time = message.queue_time_ns / 1e9
        if message.num_prompt_tokens and index % self.req.n == 0:
            self._num_prompt[index // self.req.n] = message.num_prompt_tokens
            self._num_cached[index // self.req.n] = message.num_cached_tokens
            self._usage.prompt_tokens = sum(self._num_prompt)
            self._usage.cached_tokens = sum(self._num_cached)
        counted = max(self._generated[index] + len(message.token_ids), message.num_generated_tokens)
        # Counted as they come (vLLM counts each step's), so rate() is the live throughput of long streams too.
        metrics.GENERATION_TOKENS.inc(counted - self._generated[index])
        self._generated[index] = counted
        if not self._heard[index]:
            # A choice's prompt tokens count once the scheduler answers for it (prefilled), as vLLM counts them at the
            # first token (a request whose client left while it waited in the queue counts none), and once per choice,
            # as vLLM's prompt_tokens_total and the scheduler's count the children of an n > 1 request: the replicas'
            # sum is the scheduler's. usage.prompt_tokens counts the prompt once.
            metrics.PROMPT_TOKENS.inc(message.num_prompt_tokens or self._num_prompt[index // self.req.n])
        self._heard[index] = True
        # llama-server's n_tokens_max: the most tokens a slot held, the prompt and the output but its last sampled
        # token (never decoded), as /completion's tokens_cached counts them.
        LLAMA_CPP.observe_tokens(self._num_prompt[index // self.req.n] + max(counted - 1, 0))
        if message.token_ids:
            self._time_tokens(index)

    def _time_tokens(self, index: int) -> None:
        """The times of a message with tokens: the choice's first token (its prompt time, from its seat to that token,
        as llama.cpp's timings.prompt_ms, and the request's TTFT), else the generation time since its last token;
        llama-server's series read them (gateway.metrics_llama_cpp)."""
        now = time.monotonic()
        if self._choice_first_at[index] is None:
            self._choice_first_at[index] = now
            LLAMA_CPP.add_prompt_seconds(max(now - self._start - self._queue_time, 0.0))
        else:
            LLAMA_CPP.add_predicted_seconds(now - self._last_token_at[index])
        self._last_token_at[index] = now
        if self._first_token_at is None:
            self._first_token_at = now
            metrics.TTFT.observe(self._first_token_at - self._start)
