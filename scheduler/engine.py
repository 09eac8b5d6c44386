"""Scheduler process: the step loop that ties the Scheduler to the worker link and to the per-request streams.

One asyncio loop: plan step n, send it, await its StepResult, apply it, plan step n+1; in the decode steady state
step n+1 is planned and sent while n runs (asynchronous scheduling, scheduler/lookahead.py), at most two in flight.
Liveness (the worker's hellos, pings and loss) is scheduler/worker_liveness.py's.
"""
import asyncio
import logging
import time

from proto import pb
from scheduler import admission, lookahead
from scheduler.engine_stats import EngineStats, RequestTimer
from scheduler.inflight import InFlight
from scheduler.prefix_cache import PrefixCacheConfig, anchor_token_id
from scheduler.repetition import repetition_stop
from scheduler.request import Request
from scheduler.scheduler import Scheduler, SchedulerLeakError, SchedulerLimits
from scheduler.streams import Stream, Streams
from scheduler.worker_liveness import WorkerLiveness, WorkerLostError

log = logging.getLogger("sparkinfer.scheduler")
SEND_RETRY_S = 0.001
FINISH_REASONS = ("stop", "length")   # reasons the gateway may end a request with (Finish RPC)


class Engine(WorkerLiveness):
    def __init__(self, config, card: dict, link, metrics, on_health=None):
        self.config, self.card, self.link, self.metrics = config, card, link, metrics
        limits = SchedulerLimits(config.max_num_batched_tokens, config.max_num_seqs)
        prefix = PrefixCacheConfig(bool(config.prefix_cache), config.prefix_cache_entries,
                                   config.prefix_cache_min_tokens, anchor_token_id(card))
        self.scheduler = Scheduler(limits, 0, 16, 0, card["max_context_len"], clock=time.monotonic_ns,
                                   prefix_cache=prefix)
        self.streams = Streams()
        self.stats = EngineStats()
        self.timer = RequestTimer(metrics)
        self.worker_alive, self.worker_id, self.worker_hello = False, "", None
        self.last_seen = 0.0
        self.stuck = None            # (worker_id, session_id) of a worker whose step timed out (WorkerLiveness)
        self.refused_workers = set()  # ids of workers of another wire version, each logged once (WorkerLiveness)
        self.standbys = {}           # standby worker id -> the serving worker's id when it was logged (WorkerLiveness)
        self.alive_event, self.work_event = asyncio.Event(), asyncio.Event()
        self.inflight = InFlight()   # steps sent and not yet applied, oldest first
        self.on_health = on_health or (lambda serving: None)
        self.handlers = {"result": self.handle_result, "hello": self.handle_hello}
        self.tasks = []
        self._nonce = 0
        self._rejected_groups = admission.RejectedGroups()
        self.draining = False        # SIGTERM: new requests are refused, admitted ones run on (begin_drain)

    def start(self) -> None:
        """Starts the engine's loops on the running event loop: receive from the worker, ping it, run steps."""
        self.tasks = [asyncio.create_task(coro) for coro in (self.recv_loop(), self.ping_loop(), self.step_loop())]

    async def stop(self) -> None:
        """Cancels the engine's loops (step, receive, ping) and waits for them to end."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    # ------------------------------------------------------------------ requests

    def submit(self, request) -> asyncio.Queue:
        """Admits a pb.GenerateRequest; returns its response queue. Raises a RequestError at once."""
        try:
            self._admit(request)
        except admission.RequestError as exc:
            if self._rejected_groups.first_refusal(request.group_id):
                self.metrics.requests_rejected.labels(reason=exc.reason).inc()
            raise
        eos = frozenset() if request.ignore_eos else frozenset(self.card["eos_token_ids"])
        req = Request(request.req_id, list(request.prompt_token_ids), request.sampling, request.max_tokens,
                      frozenset(request.stop_token_ids), eos, arrival_ns=time.monotonic_ns(),
                      constraint=request.constraint if request.HasField("constraint") else None,
                      cache_salt=request.cache_salt, priority=request.priority,
                      repetition_stop=repetition_stop(request))
        stream = Stream(req, asyncio.Queue(), request.group_id)
        self.streams[req.req_id] = stream
        self.scheduler.add_request(req)
        self._update_gauges()
        self.work_event.set()
        return stream.queue

    def begin_drain(self) -> None:
        """From now on new requests are refused (UNAVAILABLE); the admitted ones, and later choices of their API
        requests, run to their end. The server waits for `streams` to empty before it stops."""
        self.draining = True

    def _admit(self, request) -> None:
        if self.draining and not self._group_admitted(request.group_id):
            raise admission.ShuttingDownError("the scheduler is shutting down and takes no new requests")
        if not self.worker_alive:
            raise admission.WorkerUnavailableError("no worker is connected to the scheduler")
        depth = self.config.max_queue_depth
        if depth > 0 and not self._group_admitted(request.group_id):
            admission.check_queue_depth(admission.num_queued_requests(self.scheduler, self.streams, depth), depth)
        if request.req_id in self.streams or not request.req_id:
            raise admission.DuplicateRequestError(f"req_id {request.req_id!r} is empty or already running")
        admission.check_prompt(request.prompt_token_ids, request.max_tokens, self.scheduler.max_context_len,
                               self.vocab_size)
        admission.check_sampling(request, self.vocab_size)

    def _group_admitted(self, group_id: str) -> bool:
        """Whether another choice (same group_id) of this API request is admitted: those are never refused."""
        return self.streams.has_group(group_id)

    @property
    def vocab_size(self) -> int:
        """The worker's vocabulary size from its hello, else the checkpoint card's; 0 when neither says."""
        hello_vocab = self.worker_hello.vocab_size if self.worker_hello else 0
        return hello_vocab or self.card.get("vocab_size", 0)

    def cancel(self, req_id: str) -> None:
        """Drops a request (client went away); its slot and blocks are free before the next step."""
        stream = self.streams.pop(req_id, None)
        if stream is None:
            return
        if self.scheduler.abort(req_id) is not None:
            self.timer.finished(stream.req)
        self._update_gauges()

    def finish(self, req_id: str, reason: str) -> bool:
        """Ends a request the gateway stopped itself (stop string) with `reason`: frees its slot and blocks before
        the next step, ends its stream with that finish_reason and counts it under it. False if already ended."""
        if reason not in FINISH_REASONS:
            raise admission.InvalidRequestError(f"finish_reason {reason!r} is not one of {', '.join(FINISH_REASONS)}")
        stream = self.streams.pop(req_id, None)
        if stream is None or self.scheduler.abort(req_id, reason) is None:
            return False
        req = stream.req
        stream.queue.put_nowait(pb.GenerateResponse(finish_reason=reason, stop_token_id=-1,
                                                    num_generated_tokens=len(req.output_token_ids)))
        self.timer.finished(req)
        self._update_gauges()
        return True

    def reset_prefix_cache(self):
        """Drops the prefix cache's ready entries (ResetPrefixCache)."""
        cache = self.scheduler.prefix_cache
        num_dropped = cache.clear()
        self._update_gauges()
        return pb.ResetPrefixCacheResponse(num_dropped=num_dropped, num_entries=cache.num_entries)

    def load(self):
        """The scheduler's load as pb.LoadResponse: request counts, free/total KV blocks and state slots, worker
        liveness, preemptions, limits, KV usage (0-1), prefix-cache blocks and entries, draining, device, and the steps
        run with the sequences they ran (llama-server's n_decode_total and n_busy_slots_per_decode, on the gateway)."""
        sched = self.scheduler
        return pb.LoadResponse(
            num_running=sched.num_running, num_waiting=sched.num_waiting,
            num_free_blocks=sched.block_manager.num_free_blocks, num_total_blocks=sched.block_manager.num_total_blocks,
            num_free_slots=sched.state_pool.num_free_slots, num_total_slots=sched.state_pool.num_total_slots,
            worker_alive=self.worker_alive, num_preemptions=sched.num_preemptions,
            max_num_seqs=sched.max_num_seqs, max_queue_depth=self.config.max_queue_depth,
            kv_cache_usage=sched.block_manager.usage, num_cached_blocks=sched.prefix_cache.num_cached_blocks,
            num_prefix_entries=sched.prefix_cache.num_entries, draining=self.draining,
            device=self.worker_hello.device if self.worker_alive and self.worker_hello else "",
            block_size=sched.block_manager.block_size, num_steps=self.stats.num_steps,
            num_step_rows=self.stats.num_rows)

    # ------------------------------------------------------------------ step loop

    async def step_loop(self) -> None:
        """Runs steps while there is work and a live worker; a scheduler exception fails the running requests (error)
        instead of leaving them hanging, and the loop goes on."""
        while True:
            await self.work_event.wait()
            if not self.worker_alive:
                await self.alive_event.wait()
                continue
            try:
                await self.run_one_step()
            except Exception as exc:  # a scheduler bug must not leave every request hanging
                log.exception("scheduler step failed")
                self.publish(self.scheduler.fail_running(f"scheduler error: {exc!r}"))
                self._update_gauges()

    async def run_one_step(self) -> None:
        """Plans and sends a step when none is in flight, a lookahead step behind a lone one in flight
        (asynchronous scheduling, scheduler/lookahead.py), then awaits and applies the oldest step's result.
        Clears work_event when there is nothing to run."""
        try:
            if not self.inflight:
                t0 = time.perf_counter_ns()
                step = self._plan()
                if step is None:
                    self.work_event.clear()
                    self._idle_check()
                    return
                await self._send_step(step, time.perf_counter_ns() - t0)
            if len(self.inflight) == 1 and self.config.async_scheduling:
                t0 = time.perf_counter_ns()
                ahead = lookahead.plan(self.scheduler, self.inflight.oldest.step)
                if ahead is not None:
                    await self._send_step(ahead, time.perf_counter_ns() - t0)
        except WorkerLostError:
            return
        await self._apply_oldest()

    def _plan(self):
        """Scheduler.schedule with its prefix-cache and preemption counters; None when nothing can run."""
        cache_stats = self.scheduler.prefix_cache.stats
        num_queried, num_hit = cache_stats.num_query_tokens, cache_stats.num_hit_tokens
        # Preemption happens only here: schedule() takes blocks from later requests when a running one must grow.
        num_preemptions = self.scheduler.num_preemptions
        step = self.scheduler.schedule()
        self.metrics.prefix_cache_queries.inc(cache_stats.num_query_tokens - num_queried)
        self.metrics.prefix_cache_hits.inc(cache_stats.num_hit_tokens - num_hit)
        self.metrics.num_preemptions.inc(self.scheduler.num_preemptions - num_preemptions)
        return step

    async def _apply_oldest(self) -> None:
        """Awaits the oldest in-flight step's StepResult and applies it; a worker that never answers is lost."""
        flight = self.inflight.oldest
        # asyncio.wait, not wait_for: Python 3.11's wait_for can swallow a cancel (Engine.stop) that arrives as the
        # future completes (worker_lost failing it), leaving step_loop to wait forever for a worker
        done, _ = await asyncio.wait({flight.future}, timeout=self.config.step_timeout_s)
        if not done:
            # Pings still answered (I/O thread) but the compute loop is stuck: treat it as a dead worker.
            self.worker_lost(f"worker {self.worker_id} returned no result for step {flight.step.step_id} "
                             f"in {self.config.step_timeout_s} s", stuck=True)
            return
        try:
            result = flight.future.result()
        except WorkerLostError:
            return
        self.inflight.pop_oldest()
        t2 = time.perf_counter_ns()
        outputs = self.scheduler.update(result)
        self.publish(outputs)
        self._update_gauges()
        self.stats.record(flight.step, result, flight.plan_ns, t2 - flight.sent_ns, time.perf_counter_ns() - t2)
        self.metrics.iteration_tokens.observe(len(flight.step.token_ids))

    async def _send_step(self, step, plan_ns: int) -> None:
        """Sends until the socket takes it (a step must never be dropped while the worker counts as alive), then
        counts it in flight. Raises WorkerLostError when no worker is there to take it."""
        msg = pb.WorkerMessage(step=step)
        while not self.link.send(msg):
            if not self.worker_alive:
                raise WorkerLostError("no worker to send the step to")
            await asyncio.sleep(SEND_RETRY_S)
        self.inflight.add(step, plan_ns)

    def _idle_check(self) -> None:
        try:
            self.scheduler.self_check()
        except SchedulerLeakError as exc:
            # A leak is a scheduler bug; keep serving (the pools still work) but say so loudly.
            log.error("idle self-check failed: %s", exc)

    def publish(self, outputs) -> None:
        """Puts each StepOutput on its request's stream: a pb.GenerateResponse, or InvalidRequestError / StepFailedError
        for a row the worker refused or failed; a finished request's stream is dropped and its finish timed. Outputs of
        streams already gone are skipped."""
        for out in outputs:
            stream = self.streams.get(out.req_id)
            if stream is None:
                continue
            if out.error and out.invalid:
                stream.queue.put_nowait(admission.InvalidRequestError(out.error))
            elif out.error:
                stream.queue.put_nowait(admission.StepFailedError(f"worker step failed: {out.error}"))
            else:
                stream.queue.put_nowait(self.timer.response(stream.req, out))
            if out.finish_reason:
                self.streams.pop(out.req_id, None)
                self.timer.finished(stream.req)
        self.timer.flush()

    def _update_gauges(self) -> None:
        self.metrics.num_requests_running.set(self.scheduler.num_running)
        self.metrics.num_requests_waiting.set(self.scheduler.num_waiting)
        self.metrics.num_requests_waiting_for_capacity.set(self.scheduler.num_waiting)
        self.metrics.kv_cache_usage_perc.set(self.scheduler.block_manager.usage)
