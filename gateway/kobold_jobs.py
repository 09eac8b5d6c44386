"""Gateway process: the KoboldAI API's generations in flight by genkey, which /api/extra/abort ends and
/api/extra/generate/check reads, as TabbyAPI's Kobold endpoints keep them (endpoints/Kobold/utils/generation.py
generation_cache: genkey -> abort event and the text so far) for many users at once.

KoboldCpp (koboldcpp.py, one generation at a time) reads the same genkey: KoboldAI Lite sends one with each generate
(`KCPP` and four characters) and, when its user presses Abort, posts it to /api/extra/abort; it shows the text so far
(its polled streaming) from /api/extra/generate/check {"genkey"}. A bare abort or check (no genkey: KoboldCpp's single
user; SillyTavern posts a bare abort whenever its user stops) acts on the one generation in flight, and on none while
others run, as KoboldCpp acts on its current generation only while no other request waits (requestsinqueue == 0): one
user's bare abort never ends another's. A generate refused for a full queue answers KoboldCpp's busy 503.
"""
from __future__ import annotations

import functools
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional

from aiohttp import web

from gateway import metrics
from gateway.errors import Overloaded
from gateway.generation import Generation
from gateway.web import json_response

log = logging.getLogger("sparkinfer.gateway")
# KoboldCpp's answer while it cannot take the generate (koboldcpp.py: modelbusy not acquired, its multiuser queue
# full), which KoboldAI clients read as "try again" (the AI Horde worker's TextBackendBusy on a 503, detail.msg).
BUSY = {"detail": {"msg": "Server is busy; please try again later.", "type": "service_unavailable"}}


def busy_as_koboldcpp(handler):
    """A generate handler whose full-queue refusal (the scheduler's 429) is KoboldCpp's 503 busy body, its
    Retry-After kept (the other errors of these routes take KoboldCpp's shape in gateway/kobold_errors.py)."""
    @functools.wraps(handler)
    async def wrapped(self, request: web.Request) -> web.StreamResponse:
        try:
            return await handler(self, request)
        except Overloaded as exc:
            log.info("KoboldAI generate refused with 503 busy: %s", exc.message)
            metrics.REJECTED.labels(reason=exc.code).inc()
            return json_response(BUSY, status=503, headers=exc.headers)
    return wrapped


@dataclass
class KoboldJob:
    """One generate in flight: its Generation and its first choice's text so far."""
    genkey: str
    gen: Generation
    pieces: list = field(default_factory=list)
    num_tokens: int = 0
    finish_reason: Optional[str] = None
    stop_reason: Optional[object] = None

    def perf(self) -> dict:
        """KoboldCpp's last-generation fields of /api/extra/perf: prompt processing and generation seconds, tokens,
        seed (-1: random), and its stop reason (-1 invalid (here: aborted), 0 out of tokens, 1 the end token, 2 a
        stop sequence: gpttype_adapter.cpp stop_reason)."""
        now, first = time.monotonic(), self.gen.first_token_at
        reason = {"length": 0, "stop": 1 if self.stop_reason is None else 2}.get(self.finish_reason, -1)
        seed = self.gen.req.sampling.seed
        return {"last_process": round((first or now) - self.gen.started_at, 3),
                "last_eval": round(now - first, 3) if first else 0.0, "last_token_count": self.num_tokens,
                "last_seed": -1 if seed is None else seed, "stop_reason": reason}

    def add(self, delta) -> None:
        """The first choice's next Delta: its text, and (the last one) its token count and why it ended."""
        text = delta.reasoning + delta.content
        if text:
            self.pieces.append(text)
        if delta.finish_reason:
            self.num_tokens, self.finish_reason, self.stop_reason = (delta.num_tokens, delta.finish_reason,
                                                                     delta.stop_reason)

    def text(self) -> str:
        """The output so far (KoboldCpp's get_pending_output)."""
        return "".join(self.pieces)


def genkey_of(body) -> str:
    """The body's genkey, "" when it sends none (KoboldCpp reads `genparams.get('genkey', '')`; a body that does not
    parse names none)."""
    genkey = body.get("genkey") if isinstance(body, dict) else None
    return genkey if isinstance(genkey, str) else ""


class KoboldJobs:
    """The generations in flight, oldest first."""

    def __init__(self):
        self._jobs: list[KoboldJob] = []
        self.num_generations, self.started, self.last_request = 0, time.time(), time.time()
        self.last = {"last_process": 0.0, "last_eval": 0.0, "last_token_count": 0, "last_seed": -1, "stop_reason": -1}

    @contextmanager
    def track(self, genkey: str, gen: Generation):
        """Keeps the generation findable by its genkey while the block runs (until its answer is sent); then its
        figures are the last generation's (/api/extra/perf)."""
        job = KoboldJob(genkey, gen)
        self._jobs.append(job)
        self.num_generations, self.last_request = self.num_generations + 1, time.time()
        try:
            yield job
        finally:
            self._jobs.remove(job)
            self.last = job.perf()

    def perf(self, num_running: int, num_waiting: int) -> dict:
        """KoboldCpp's GET /api/extra/perf (koboldcpp.py): the last KoboldAI generation's figures, how many ran
        (total_gens), `queue` the requests waiting for a seat and `idle` 1 while the engine runs none (its modelbusy
        lock free), which clients poll before a timed run or to show the server busy; uptime and idletime in s."""
        now = time.time()
        return {**self.last, "total_gens": self.num_generations, "total_img_gens": 0, "queue": num_waiting,
                "idle": int(num_running + num_waiting == 0), "hordeexitcounter": -1, "uptime": now - self.started,
                "idletime": now - self.last_request, "quiet": False}

    def _named(self, genkey: str) -> list:
        """The generations a request's genkey names: those sent with it; for none (""), the one generation in flight
        when it is alone, whatever its genkey (koboldcpp.py: `multiuserkey=="" and requestsinqueue==0` aborts or reads
        the current generation), else none: several SillyTavern users send no genkey, and one user's Stop posts a bare
        abort that ended every other user's generation too."""
        if genkey:
            return [job for job in self._jobs if job.genkey == genkey]
        return list(self._jobs) if len(self._jobs) == 1 else []

    def abort(self, genkey: str) -> bool:
        """Ends the generations `genkey` names (_named), its text so far kept as its answer (finish "abort",
        KoboldAI's "length"), queued or running; whether any was still running."""
        return bool([job for job in self._named(genkey) if job.gen.cancel()])

    def pending_text(self, genkey: str) -> str:
        """The latest generation `genkey` names' text so far; "" when none (KoboldCpp's and TabbyAPI's empty result)."""
        jobs = self._named(genkey)
        return jobs[-1].text() if jobs else ""
