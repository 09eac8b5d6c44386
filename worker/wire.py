"""Scheduler <-> worker boundary, worker side: the I/O thread that owns the worker's ZeroMQ sockets (no pickle).

The worker connects recv_from_scheduler (DEALER, its routing id the hello's worker_id) to port P of
SPARKINFER_WORKER_ADDR and send_to_scheduler (PUSH) to port P + 1; the scheduler binds both (a ROUTER and a PULL,
scheduler/wire.py), so start order does not matter. Every frame is one serialized pb.WorkerMessage. Until it is
pinged, the I/O thread announces the worker with its WorkerHello on the DEALER every ANNOUNCE_S (the scheduler pings
only the workers that announced themselves; a restarted scheduler knows none). It answers each Ping with a
WorkerHello at once, even while the compute loop is busy, hands PackedSteps to the compute loop through a queue, and
forwards the StepResults the compute loop pushes over an inproc socket. A Ping names the worker the scheduler serves
with: any other is a standby (it gets no step), which it logs once, as it logs taking over.
"""
import queue
import threading
import time

import zmq

from proto import frames, pb
from proto.frames import WireError, split_addr  # noqa: F401  (WireError re-exported)
from proto.wire_version import WIRE_VERSION

POLL_MS = 100
# A draining worker stops once it has had no step to run for this long: the scheduler sends steps back to back while
# any request runs, so this idleness means its requests are done (or it has gone).
DRAIN_IDLE_S = 2.0
# A worker not pinged for this long announces itself again (a scheduler pings every 0.2 s by default).
ANNOUNCE_S = 0.5


def decode(frame: bytes):
    """Returns the pb.WorkerMessage in a scheduler's `frame`; raises WireError if it does not parse or is empty."""
    return frames.decode(frame, "scheduler")


def connect_addrs(worker_addr: str) -> tuple:
    """tcp://host:P -> (tcp://host:P, tcp://host:P+1). Raises ValueError if malformed."""
    host, step_port, result_port = split_addr(worker_addr)
    return f"tcp://{host}:{step_port}", f"tcp://{host}:{result_port}"


class SchedulerLink:
    """Runs the socket I/O thread; steps() yields PackedSteps (None after Shutdown), send_result() replies.
    Raises ValueError if hello has no worker_id (the scheduler addresses the worker by it)."""

    def __init__(self, worker_addr: str, hello: "pb.WorkerHello"):
        if not hello.worker_id:
            raise ValueError("the worker's hello needs a worker_id: the scheduler sends steps to it by that id")
        self.step_addr, self.result_addr = connect_addrs(worker_addr)
        self.hello = hello
        self.context = zmq.Context()
        self.inproc_addr = f"inproc://results-{id(self)}"
        self.steps = queue.Queue()
        self.handlers = {"ping": self.handle_ping, "step": self.handle_step, "shutdown": self.handle_shutdown}
        self._running = True
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self.process_sockets, name="worker-io", daemon=True)
        self._results = None
        self._last_busy = time.monotonic()     # when a step last arrived or a result last left
        self._num_steps_out = 0                # steps received whose result has not left yet
        self._drain_deadline = None            # monotonic time a draining worker stops at the latest
        self._refused_version = False          # a ping of another wire version was logged
        self._announced = self._pinged = 0.0   # monotonic times of the last announcement and of the last ping
        self._standby = False                  # the last ping named another worker as the serving one

    @property
    def draining(self) -> bool:
        """Whether drain() has started: the socket loop ends once no step ran for DRAIN_IDLE_S or the grace is over."""
        return self._drain_deadline is not None

    def drain(self, grace_s: float) -> None:
        """Steps go on being served until none has been running for DRAIN_IDLE_S, or grace_s has passed; then
        steps() ends (None) as after a Shutdown."""
        self._drain_deadline = time.monotonic() + grace_s

    def _drained(self) -> bool:
        now = time.monotonic()
        idle = self._num_steps_out == 0 and now - self._last_busy >= DRAIN_IDLE_S
        return idle or now >= self._drain_deadline

    def start(self) -> None:
        """Starts the socket thread, waits until it has connected and said hello, then makes the compute thread's
        results socket."""
        self._thread.start()
        self._ready.wait()
        # Created and used only by the compute thread (ZeroMQ sockets are not thread-safe).
        self._results = self.context.socket(zmq.PUSH)
        # A result the I/O thread no longer takes (it stopped after a drain) must not hold up context.term().
        self._results.setsockopt(zmq.LINGER, 0)
        self._results.connect(self.inproc_addr)

    def send_result(self, result) -> None:
        """Hands a pb.StepResult to the socket thread (inproc PUSH), which sends it to the scheduler; compute thread
        only (start() made the socket there)."""
        self._results.send(pb.WorkerMessage(result=result).SerializeToString())

    def process_sockets(self) -> None:
        """The socket thread (worker-io): connects recv_from_scheduler and send_to_scheduler, says hello, then forwards
        the compute thread's results and dispatches each scheduler message to handle_<kind> until stopped or drained."""
        recv_from_scheduler = self.context.socket(zmq.DEALER)
        self.send_to_scheduler = self.context.socket(zmq.PUSH)
        recv_from_compute = self.context.socket(zmq.PULL)
        recv_from_compute.bind(self.inproc_addr)
        for sock in (recv_from_scheduler, self.send_to_scheduler):
            sock.setsockopt(zmq.LINGER, 0)
        recv_from_scheduler.setsockopt(zmq.ROUTING_ID, self.hello.worker_id.encode())
        # An announcement is queued only on a live connection: none piles up while the scheduler is away.
        recv_from_scheduler.setsockopt(zmq.IMMEDIATE, 1)
        recv_from_scheduler.connect(self.step_addr)
        self.send_to_scheduler.connect(self.result_addr)
        self._ready.set()
        self._send(pb.WorkerMessage(hello=self.hello))
        poller = zmq.Poller()
        poller.register(recv_from_scheduler, zmq.POLLIN)
        poller.register(recv_from_compute, zmq.POLLIN)
        while self._running:
            events = dict(poller.poll(POLL_MS))
            if recv_from_compute in events:
                self._send_raw(recv_from_compute.recv())
                self._num_steps_out = max(self._num_steps_out - 1, 0)
                self._last_busy = time.monotonic()
            if recv_from_scheduler in events:
                self._dispatch(recv_from_scheduler.recv())
            self._announce(recv_from_scheduler)
            if self.draining and self._drained():
                self.handle_shutdown(None)
        for sock in (recv_from_scheduler, self.send_to_scheduler, recv_from_compute):
            sock.close()

    def _announce(self, sock) -> None:
        """Sends the worker's hello on its DEALER `sock` when it was neither pinged nor announced for ANNOUNCE_S; one
        that finds no connection is tried again on the next turn of the loop."""
        now = time.monotonic()
        if now - max(self._pinged, self._announced) < ANNOUNCE_S:
            return
        try:
            sock.send(pb.WorkerMessage(hello=self.hello).SerializeToString(), flags=zmq.NOBLOCK)
        except zmq.Again:
            return
        self._announced = now

    def _dispatch(self, frame: bytes) -> None:
        try:
            msg = decode(frame)
        except WireError as exc:
            print(f"worker: dropped frame: {exc}", flush=True)
            return
        kind = msg.WhichOneof("kind")
        handler = self.handlers.get(kind)
        if handler is not None:
            handler(getattr(msg, kind))

    def handle_ping(self, ping) -> None:
        """Answers a pb.Ping with this worker's hello carrying the ping's nonce; a ping of another wire version (a
        scheduler of another release, proto/wire_version.py) gets none, and the first such is logged."""
        if ping.wire_version != WIRE_VERSION:
            if not self._refused_version:
                self._refused_version = True
                print(f"worker: the scheduler speaks wire version {ping.wire_version or '(none)'}, this worker "
                      f"{WIRE_VERSION} (another SparkInfer release): not answering it; run the scheduler and the "
                      "worker of the same release", flush=True)
            return
        self._pinged = time.monotonic()
        self._note_role(ping.serving_worker_id)
        hello = pb.WorkerHello()
        hello.CopyFrom(self.hello)
        hello.nonce = ping.nonce
        hello.num_steps_pending = self._num_steps_out
        self._send(pb.WorkerMessage(hello=hello))

    def _note_role(self, serving_worker_id: str) -> None:
        """Logs once that this worker is a standby (a ping names another serving worker), and once that it serves
        after having been one."""
        me = self.hello.worker_id
        if serving_worker_id and serving_worker_id != me and not self._standby:
            self._standby = True
            print(f"worker {me}: is a standby: worker {serving_worker_id} serves the scheduler at {self.step_addr}; "
                  "this one gets no step and takes over if that one stops", flush=True)
        elif serving_worker_id == me and self._standby:
            self._standby = False
            print(f"worker {me}: serves the scheduler now", flush=True)

    def handle_step(self, step) -> None:
        """Hands a pb.PackedStep to the compute thread's queue."""
        self._num_steps_out += 1
        self._last_busy = time.monotonic()
        self.steps.put(step)

    def handle_shutdown(self, _shutdown) -> None:
        """Stops the socket loop and ends the compute thread's queue (None)."""
        self._running = False
        self.steps.put(None)

    def _send(self, msg) -> None:
        self._send_raw(msg.SerializeToString())

    def _send_raw(self, frame: bytes) -> None:
        try:
            self.send_to_scheduler.send(frame, flags=zmq.NOBLOCK)
        except zmq.Again:
            pass  # no scheduler connected: hellos repeat on every ping, results of a gone scheduler are moot

    def close(self) -> None:
        """Stops the socket thread (2 s at most), closes the results socket and terminates the ZeroMQ context."""
        self._running = False
        self._thread.join(timeout=2)
        if self._results is not None:
            self._results.close()
        self.context.term()
