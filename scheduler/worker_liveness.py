"""Scheduler process: the worker's liveness, as the Engine sees it through its link.

A Ping goes out every ping_interval_s to every worker connected (scheduler/wire.py); a worker's I/O thread answers with
a WorkerHello even while it computes. The first worker registered serves: steps go to it alone. Another one that
answers meanwhile is a standby (logged once), registered as a new worker is once the serving one is lost. Silence of
the serving worker for worker_timeout_s marks it dead: every request fails UNAVAILABLE and health turns NOT_SERVING
until a WorkerHello arrives again. A serving worker whose process exited is marked dead at the next ping, without
waiting out the silence: the ping to it finds its connection closed (WorkerLink.serving_gone). A hello from a new
worker resets the scheduler's pools to its sizes. A worker whose step brought no result within step_timeout_s (its
compute loop stuck, its I/O thread still answering pings) stays dead while its hellos say it has steps pending, until
a result of that session comes back (its loop runs again) or another worker process says hello. A worker of another
wire version (proto/wire_version.py: another release) is never registered.
"""
import asyncio
import logging
import time
import uuid

from proto import pb
from proto.wire_version import WIRE_VERSION
from scheduler import admission

log = logging.getLogger("sparkinfer.scheduler")


class WorkerLostError(Exception):
    """The worker stopped answering while a step was in flight."""


class WorkerLiveness:
    """The Engine's side of the worker link: frames in (results, hellos), pings out, a lost worker's requests failed.
    Uses the Engine's link, config, card, scheduler, streams, inflight, metrics and timer."""

    async def recv_loop(self) -> None:
        """Reads every message from the workers and hands it to its handler by kind (result, hello); a frame that does
        not decode is logged and dropped. The handlers count the serving worker's messages as its signs of life."""
        while True:
            try:
                msg = await self.link.recv()
            except Exception as exc:  # a bad frame must not stop the loop
                log.warning("dropped worker frame: %s", exc)
                continue
            kind = msg.WhichOneof("kind")
            handler = self.handlers.get(kind)
            if handler is None:
                log.warning("unexpected %s message from worker", kind)
                continue
            handler(getattr(msg, kind))

    def handle_result(self, result) -> None:
        """A pb.StepResult of this session resolves its step in flight; one from an earlier session (before a worker
        loss) is dropped. One of a stuck worker's session says its compute loop runs again: its hellos count again."""
        if self.stuck is not None and result.session_id == self.stuck[1]:
            log.info("worker %s returned a step result again; its next hello registers it (unless another "
                     "worker serves by then)", self.stuck[0])
            self.stuck = None
        if result.session_id != self.scheduler.session_id:
            return
        self.last_seen = time.monotonic()
        self.inflight.resolve(result)

    def handle_hello(self, hello) -> None:
        """A pb.WorkerHello that answers a Ping (nonce > 0): the serving worker's is its sign of life; another worker's,
        while one serves, makes it a standby (logged once); with none serving, it registers: a new session starts and
        the pools are sized from it (KV blocks, slots, context capped by the card's). A worker of another release or
        checkpoint is refused, said once, already from its unprompted first hello."""
        # Only a hello that answers a Ping proves steps can reach the worker: its unprompted first hello can
        # arrive before its step socket has connected.
        if self._refused(hello) or hello.nonce == 0:
            return
        if self.worker_alive:
            self._hello_while_serving(hello)
            return
        # A stuck worker's I/O thread answers pings while its compute loop is stuck: registered again as if new, it
        # was sent every new request to fail after another step timeout, for ever, and the launcher's watchdog, which
        # waits for SPARKINFER_WORKER_HUNG_S of no live worker in a row (deploy/watchdog.py), never restarted it.
        if self.stuck is not None and hello.worker_id == self.stuck[0]:
            if hello.num_steps_pending:
                return
            # Nothing pending: the step never reached it (lost on the way, e.g. a reconnect), it is idle, not stuck.
            log.info("worker %s has no step pending: its step was lost, not stuck; registering it again",
                     hello.worker_id)
            self.stuck = None
        self.standbys.pop(hello.worker_id, None)
        self.scheduler.abort_all()
        self.scheduler.session_id = uuid.uuid4().hex
        max_context_len = min(self.card["max_context_len"], hello.max_context_len or self.card["max_context_len"])
        self.scheduler.reset_pools(hello.num_blocks, hello.block_size, hello.num_slots, max_context_len)
        self.worker_alive, self.worker_id, self.worker_hello = True, hello.worker_id, hello
        self.link.serving, self.last_seen = hello.worker_id, time.monotonic()
        log.info("worker %s up on %s: %d KV blocks x %d tokens, %d state slots, context %d, %d running at most",
                 hello.worker_id, hello.device, hello.num_blocks, hello.block_size, hello.num_slots,
                 self.scheduler.max_context_len, self.scheduler.max_num_seqs)
        self._send_ping()
        self.metrics.worker_alive.set(1)
        self.metrics.set_cache_config(hello.block_size, hello.num_blocks, self.config.prefix_cache)
        self._update_gauges()
        self.alive_event.set()
        self.on_health(True)

    def _hello_while_serving(self, hello) -> None:
        """The serving worker's hello is its sign of life; another worker is a standby, logged once per serving one.
        Two workers that both served dealt each other's steps and replaced each other at every ping."""
        if hello.worker_id == self.worker_id:
            self.last_seen = time.monotonic()
        elif self.standbys.get(hello.worker_id) != self.worker_id:
            self.standbys[hello.worker_id] = self.worker_id
            log.info("worker %s is a standby: worker %s serves this scheduler", hello.worker_id, self.worker_id)

    def _refused(self, hello) -> bool:
        """Whether the worker is not to be used (_refusal), saying so once per worker."""
        refusal = self._refusal(hello)
        if refusal and hello.worker_id not in self.refused_workers:
            self.refused_workers.add(hello.worker_id)
            log.error("worker %s %s: not using it", hello.worker_id, refusal)
        return bool(refusal)

    def _refusal(self, hello) -> str:
        """Why a worker's hello is not registered, "" when it is: another wire version (proto/wire_version.py: another
        release), or another checkpoint than the card's (worker/model_card.py checkpoint_digest: the gateways would
        render and tokenize for this one while the worker ran that one's weights)."""
        if hello.wire_version != WIRE_VERSION:
            return (f"speaks wire version {hello.wire_version or '(none)'}, this scheduler {WIRE_VERSION} (another "
                    f"SparkInfer release); run the scheduler and the worker of the same release")
        mine = self.card.get("checkpoint_digest", "")
        if mine and hello.checkpoint_digest != mine:
            return (f"loaded checkpoint {hello.model_id!r} (digest {hello.checkpoint_digest or '(none)'}), this "
                    f"scheduler {self.card['model_id']!r} (digest {mine}); give both the same SPARKINFER_MODEL")
        return ""

    async def ping_loop(self) -> None:
        """Pings the workers every ping_interval_s; a serving worker silent past worker_timeout_s is declared lost
        (worker_lost)."""
        while True:
            self._send_ping()
            if self.worker_alive and self.link.serving_gone:
                self.worker_lost(f"worker {self.worker_id} disconnected (its connection closed: the process exited)")
            await asyncio.sleep(self.config.ping_interval_s)
            silence = time.monotonic() - self.last_seen
            if self.worker_alive and silence > self.config.worker_timeout_s:
                self.worker_lost(f"worker {self.worker_id} stopped answering ({silence:.2f} s without a message)")

    def _send_ping(self) -> None:
        self._nonce += 1
        self.link.send(pb.WorkerMessage(ping=pb.Ping(nonce=self._nonce, session_id=self.scheduler.session_id,
                                                     wire_version=WIRE_VERSION, serving_worker_id=self.worker_id)))

    def worker_lost(self, reason: str, stuck: bool = False) -> None:
        """Fails every request with UNAVAILABLE, reports NOT_SERVING and waits for a new WorkerHello; a `stuck` worker
        (a step past step_timeout_s) is not registered again by its hellos while they say a step is pending, nor until a
        result of its session comes."""
        log.error("%s; failing %d requests", reason, len(self.streams))
        if stuck:
            self.stuck = (self.worker_id, self.scheduler.session_id)
            log.error("worker %s counts as dead until it returns a step result or another worker says hello",
                      self.worker_id)
        self.worker_alive, self.worker_id, self.link.serving = False, "", ""
        self.alive_event.clear()
        self.on_health(False)
        self.metrics.worker_alive.set(0)
        error = admission.WorkerUnavailableError(f"{reason}; the request was aborted")
        for stream in self.streams.values():
            stream.queue.put_nowait(error)
            # The server failed it, not its client: vLLM's FinishReason.ERROR, not ABORT.
            stream.req.finish_reason = "error"
            self.timer.finished(stream.req)
        self.streams.clear()
        self.scheduler.abort_all()
        self.inflight.fail_all(WorkerLostError(reason))
        self._update_gauges()
