"""Gateway process: the one generation path every HTTP API (OpenAI, LM Studio, Ollama) translates into and out of."""
from __future__ import annotations

import asyncio
import collections
import logging
import weakref
from typing import Callable, Optional

from gateway import metrics
from gateway.client import SchedulerClient
from gateway.errors import ApiError, ModelUnloadable, Unavailable
from gateway.gen_request import ChoiceResult, GenRequest, Sampling, Usage  # noqa: F401 - part of the engine API
from gateway.generation import Generation
from gateway.model import ModelCard
from gateway.ollama_keepalive import LoadState
from gateway.offload import run_cpu
from gateway.pipeline import Delta, TokenLogprob  # noqa: F401 - part of the engine API
from proto import pb
from proto.served_names import served_names

# The most ended choices kept for GET /slots' idle seats (more seats than this show no last task).
MAX_FINISHED_TASKS = 1024
log = logging.getLogger("gateway")


class Engine:
    """The gateway's view of one scheduler: model card (cached Info) plus generation.

    Use: build a GenRequest, `gen = await engine.start(req)`, then `await gen.next(timeout)` yields
    Delta objects (one per emitted piece, any choice) until None; `gen.usage()` gives token counts;
    `await gen.close()` cancels every scheduler call (client gone). `await engine.complete(req)` runs
    it to the end and returns (per-choice results, usage) for non-streamed responses.
    """

    def __init__(self, client: Optional[SchedulerClient] = None, served_model_name: str = "",
                 any_model_name: bool = False, default_template_kwargs: Optional[dict] = None,
                 chat_template: Optional[str] = None, force_include_usage: bool = False,
                 exclude_tools_when_none: bool = False):
        self.client = client
        # vLLM's several served names: the first names the model, the others are aliases its card accepts.
        names = served_names(served_model_name)
        self.served_model_name = names[0] if names else ""
        self.served_aliases = tuple(names[1:])
        self.any_model_name = any_model_name   # SPARKINFER_SKIP_MODEL_NAME_VALIDATION: every name is the model
        self.default_template_kwargs = dict(default_template_kwargs or {})   # SPARKINFER_DEFAULT_CHAT_TEMPLATE_KWARGS
        self.chat_template = chat_template     # SPARKINFER_CHAT_TEMPLATE: rendered in place of the checkpoint's
        self.force_include_usage = force_include_usage   # SPARKINFER_FORCE_INCLUDE_USAGE
        # SPARKINFER_EXCLUDE_TOOLS_WHEN_TOOL_CHOICE_NONE: every route that renders a chat prompt reads it off the card.
        self.exclude_tools_when_none = exclude_tools_when_none
        self._card: Optional[ModelCard] = None
        self._card_info = b""           # the InfoResponse bytes the card was made from
        self._card_epoch = -1           # client.epoch when the card was last confirmed
        self._card_lock = asyncio.Lock()
        self._unloadable: Optional[tuple] = None  # (the InfoResponse bytes, its ModelUnloadable)
        # Ollama's view of the model's residency (/api/ps): every API's generations use the model.
        self.load_state = LoadState()
        # The generations not yet collected, for abort_all (a closed one ignores it).
        self._live: "weakref.WeakSet[Generation]" = weakref.WeakSet()
        self._next_task_id = 0   # the task id of the next choice started (llama.cpp's id_task on GET /slots)
        # The choices that ended last, newest first, each as snapshot_finished made it (llama.cpp's GET /slots shows
        # them on its idle slots); none kept while nothing sets snapshot_finished.
        self.snapshot_finished: Optional[Callable] = None
        self.finished_tasks: collections.deque = collections.deque(maxlen=MAX_FINISHED_TASKS)

    async def card(self) -> ModelCard:
        """The model card; fetched from the scheduler on first use, and again after the scheduler was unreachable or
        without a worker (it may come back with another checkpoint or context). Raises Unavailable with no card."""
        if self._card is None or self._card_epoch != getattr(self.client, "epoch", 0):
            async with self._card_lock:
                if self._card is None or self._card_epoch != getattr(self.client, "epoch", 0):
                    await self._refresh_card()
        return self._card

    async def _refresh_card(self) -> None:
        epoch = getattr(self.client, "epoch", 0)
        try:
            info = await self.client.info()
        except ApiError:
            if self._card is None:
                raise
            return   # still away: the last card answers what needs no engine (/v1/models), generations fail 503
        raw = info.SerializeToString()
        if raw != self._card_info:
            # Parsing the tokenizer and scanning its vocabulary takes a while: not on the loop.
            self._card = await run_cpu(self._load_card, info)
            self._card_info = raw
            metrics.set_max_context_len(self._card.max_context_len)
        self._card_epoch = epoch

    def known_model_name(self) -> str:
        """The served name, as served_name() gives it, without waiting for the card: "" while none was fetched."""
        return self.served_model_name or (self._card.model_id if self._card is not None else "")

    async def served_name(self) -> str:
        """The model name every API states and accepts: the configured served name (SPARKINFER_SERVED_MODEL_NAME),
        else the checkpoint's id from the card. Raises Unavailable as card() does."""
        return self.served_model_name or (await self.card()).model_id

    def _load_card(self, info) -> ModelCard:
        """ModelCard.from_info, or ModelUnloadable (logged once, and not parsed again while the scheduler sends the
        same checkpoint): a corrupt tokenizer.json was a 500 with a traceback on every /health probe."""
        raw = info.SerializeToString()
        if self._unloadable is not None and self._unloadable[0] == raw:
            raise self._unloadable[1]
        try:
            if self.chat_template:
                # vLLM's --chat-template replaces the checkpoint's templates, its tool_use one too.
                info = pb.InfoResponse.FromString(raw)
                info.chat_template = self.chat_template
            card = ModelCard.from_info(info)
            card.served_aliases, card.any_model_name = self.served_aliases, self.any_model_name
            card.default_template_kwargs = self.default_template_kwargs
            card.force_include_usage = self.force_include_usage
            card.exclude_tools_when_none = self.exclude_tools_when_none
            return card
        except Exception as exc:
            error = ModelUnloadable(f"the model {info.model_id!r} cannot be served: its tokenizer.json or chat "
                                    f"template does not load ({type(exc).__name__}: {exc})")
            log.error("%s", error.message)
            self._unloadable = (raw, error)
            raise error from None

    async def model_loaded(self, timeout: float = 2.0) -> bool:
        """Whether the model can generate now: the scheduler answers and has a live worker (what /api/ps and
        LM Studio's model `state` report; the card alone is cached and outlives a dead worker)."""
        return await self.model_device(timeout) is not None

    async def model_listed(self, timeout: float = 2.0) -> bool:
        """model_loaded, less an unload a client asked for that no request has undone (LM Studio's
        /api/v1/models/unload, Ollama's keep_alive 0): what LM Studio's model lists report as loaded."""
        return await self.listed_load(timeout) is not None

    async def listed_load(self, timeout: float = 2.0) -> Optional["pb.LoadResponse"]:
        """live_load while model_listed, else None: the load an instance LM Studio's model lists show runs under."""
        return None if self.load_state.unloaded else await self.live_load(timeout)

    async def check_loaded(self, timeout: float = 2.0, starting: Optional[str] = None) -> "pb.LoadResponse":
        """The scheduler's load while the model can generate now; else the error a generation would get: the
        scheduler's own (503 unreachable, 504 not answering), a 503 for no live worker (each a 503 saying `starting`
        when given: llama-server's "Loading model") or a draining scheduler's 503. For a client's explicit load, which
        must not answer "loaded" then (Ollama answers its load only once its scheduler has the runner), and the
        probes that tell a server that serves (llama.cpp's /props and /slots)."""
        try:
            load = await self.client.load(timeout=timeout)
        except ApiError:
            if starting is None:
                raise
            raise Unavailable(starting) from None
        if not load.worker_alive:
            raise Unavailable(starting or "the model server is unavailable: no worker is connected to the scheduler")
        if load.draining:
            # the scheduler's own refusal of a new request while it drains (scheduler/engine.py ShuttingDownError)
            raise Unavailable("the model server is unavailable: the scheduler is shutting down and takes no new "
                              "requests")
        return load

    async def live_load(self, timeout: float = 2.0) -> Optional["pb.LoadResponse"]:
        """The scheduler's load while a live worker runs the model; None when it cannot generate now (model_loaded).
        Unlike check_loaded, never an error: for the model lists, which report the model unloaded then."""
        try:
            load = await self.client.load(timeout=timeout)
        except ApiError:
            return None
        return load if load.worker_alive else None

    async def model_device(self, timeout: float = 2.0) -> Optional[str]:
        """The device the loaded model runs on ("cpu", "cuda:0 (...)"; "" from a scheduler that does not say); None
        when it cannot generate now (model_loaded)."""
        load = await self.live_load(timeout)
        return None if load is None else load.device

    async def start(self, req: GenRequest) -> Generation:
        """Starts a Generation of `req` (its n scheduler calls) and counts the model as in use (keep_alive)."""
        gen = Generation(self, req, await self.card(), self._next_task_id)
        self._next_task_id += req.num_choices
        self._live.add(gen)
        self.load_state.touch(req.keep_alive, req.num_ctx)
        return gen

    async def complete(self, req: GenRequest) -> tuple[list[ChoiceResult], Usage]:
        """Runs a request to the end; cancels the scheduler calls if the caller is cancelled."""
        results, gen = await self.run(req)
        return results, gen.usage()

    async def run(self, req: GenRequest) -> tuple[list[ChoiceResult], Generation]:
        """complete, with the Generation it ran (its timing: llama.cpp's timings)."""
        gen = await self.start(req)
        return await self.results(gen), gen

    @staticmethod
    async def results(gen: Generation) -> list[ChoiceResult]:
        """A started generation run to its end (a non-streamed answer): its choices' whole results, index order."""
        results = [ChoiceResult(i) for i in range(gen.req.num_choices)]
        await gen.drain(lambda delta: results[delta.index].absorb(delta))
        return results

    def generating(self) -> bool:
        """Whether any generation is still running (started and not yet closed)."""
        return any(not gen.closed for gen in self._live)

    def num_generating(self) -> int:
        """Generations still running (started and not yet closed)."""
        return sum(not gen.closed for gen in self._live)

    def running_choices(self) -> list:
        """ChoiceProgress of every choice the scheduler runs for this gateway now, in the order they were started."""
        choices = [choice for gen in list(self._live) for choice in gen.running_choices()]
        return sorted(choices, key=lambda choice: choice.task_id)

    def remember_finished(self, choices: list) -> None:
        """Keeps the snapshots (snapshot_finished) of these ended choices (ChoiceProgress), newest first."""
        if self.snapshot_finished is not None:
            self.finished_tasks.extendleft(self.snapshot_finished(choice) for choice in choices)

    def abort_all(self, error: ApiError) -> int:
        """Ends every running generation with `error`; returns how many there were."""
        live = [gen for gen in self._live if not gen.closed]
        for gen in live:
            gen.abort(error)
        return len(live)

    def cancel_ids(self, wanted: Callable[[str], bool]) -> list:
        """The cancel ids (GenRequest.cancel_ids) `wanted` accepts of the generations still running, in start order."""
        return [cancel_id for gen in list(self._live) if not gen.closed for cancel_id in gen.req.cancel_ids
                if wanted(cancel_id)]

    def cancel(self, wanted: Callable[[str], bool]) -> list:
        """Ends with finish_reason "abort" the running choices of every generation whose cancel id (GenRequest.
        cancel_ids) `wanted` accepts; returns the ids that ended something."""
        done = []
        for gen in [gen for gen in self._live if not gen.closed]:
            for cancel_id, indices in gen.req.cancel_ids.items():
                if wanted(cancel_id) and gen.cancel(indices):
                    done.append(cancel_id)
        return done

    def record_finish(self, gen: Generation, finish_reason: str) -> None:
        """Counts a finished choice: request_success_total{finished_reason} and the e2e latency (s)."""
        self.load_state.release()
        metrics.REQUEST_SUCCESS.labels(finished_reason=finish_reason).inc()
        metrics.E2E_LATENCY.observe(gen.elapsed())
