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
from contextlib import contextmanager
from dataclasses import dataclass, field

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
    """A generate handler whose full-queue refusal (the scheduler's 429) is KoboldCpp's 503 busy body instead of
    another API's error shape (LM Studio's on /api/v1/*, Ollama's on /api/extra/*), its Retry-After kept."""
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

    def add(self, text: str) -> None:
        """A piece of the first choice's output, as it comes."""
        if text:
            self.pieces.append(text)

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

    @contextmanager
    def track(self, genkey: str, gen: Generation):
        """Keeps the generation findable by its genkey while the block runs (until its answer is sent)."""
        job = KoboldJob(genkey, gen)
        self._jobs.append(job)
        try:
            yield job
        finally:
            self._jobs.remove(job)

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
