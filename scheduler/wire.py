"""Scheduler <-> worker boundary, scheduler side: ZeroMQ sockets and the one-protobuf-frame codec (no pickle).

Topology: the scheduler binds both sockets, the worker connects, so either may start first and a worker
may come and go. Steps and pings leave on send_to_worker (ROUTER, port P of SPARKINFER_WORKER_ADDR), each addressed
to a worker by its routing id, which is its WorkerHello.worker_id (worker/wire.py sets it on its DEALER); results and
hellos arrive on recv_from_worker (PULL, port P + 1). Every frame is one serialized pb.WorkerMessage with exactly
one field of its `kind` oneof set.

Several workers may connect to one scheduler (a compose file's `replicas: 2`, a rolling update starting the new
worker before the old one stops): each announces itself with a WorkerHello on its DEALER (the ROUTER receives
[routing id, frame]) until it is pinged, pings go to every worker announced, steps only to `serving`, the worker the
engine registered (scheduler/worker_liveness.py); the others are standbys. A PUSH here dealt steps and pings
round-robin over them all.
"""

import errno

import zmq
import zmq.asyncio

from proto import frames, pb
from proto.frames import WireError, encode, split_addr  # noqa: F401  (re-exported)


def decode(frame: bytes):
    """Returns the pb.WorkerMessage in a worker's `frame`; raises WireError if it does not parse or carries nothing."""
    return frames.decode(frame, "worker")


class WorkerLink:
    """The scheduler's two bound sockets, used from one asyncio event loop. `serving` is the worker_id steps go to
    ("" while none: the engine sets it), `workers` the routing ids of the workers announced and not yet gone."""

    def __init__(self, worker_addr: str, bind_host: str, context=None):
        _, step_port, result_port = split_addr(worker_addr)
        self.context = context or zmq.asyncio.Context.instance()
        # Sends never wait (NOBLOCK), so a plain socket does; an asyncio one would wrap errors in futures.
        self.send_to_worker = zmq.Context.instance().socket(zmq.ROUTER)
        self.recv_from_worker = self.context.socket(zmq.PULL)
        for sock in (self.send_to_worker, self.recv_from_worker):
            sock.setsockopt(zmq.LINGER, 0)
        # A send to a worker that is not connected fails at once (EHOSTUNREACH) instead of being dropped in silence,
        # and a worker that reconnects under its id (a network blip) takes the id over from its dead connection.
        self.send_to_worker.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.send_to_worker.setsockopt(zmq.ROUTER_HANDOVER, 1)
        self.send_to_worker.setsockopt(zmq.SNDHWM, 64)
        try:
            self.send_to_worker.bind(f"tcp://{bind_host}:{step_port}")
            self.recv_from_worker.bind(f"tcp://{bind_host}:{result_port}")
        except zmq.ZMQError:
            self.close()         # the port that did bind is free again for a retry
            raise
        self._serving = ""
        self.serving_gone = False    # a send to `serving` found its connection closed (EHOSTUNREACH)
        self.workers = set()

    @property
    def serving(self) -> str:
        """The worker_id steps go to ("" while none); setting it clears serving_gone."""
        return self._serving

    @serving.setter
    def serving(self, worker_id: str) -> None:
        self._serving, self.serving_gone = worker_id, False

    def send(self, msg) -> bool:
        """Sends one WorkerMessage without blocking: a Ping to every worker announced, anything else to `serving`.
        False when it reached no worker (none connected, or its queue full)."""
        frame = encode(msg)
        if msg.WhichOneof("kind") != "ping":
            return bool(self.serving) and self._send_to(self.serving.encode(), frame)
        self._take_announcements()
        sent = False
        for routing_id in list(self.workers):
            sent = self._send_to(routing_id, frame) or sent
        return sent

    def _send_to(self, routing_id: bytes, frame: bytes) -> bool:
        try:
            self.send_to_worker.send_multipart([routing_id, frame], flags=zmq.NOBLOCK)
        except zmq.Again:
            return False             # its queue is full (SNDHWM)
        except zmq.ZMQError as exc:
            if exc.errno != errno.EHOSTUNREACH:
                raise
            self.workers.discard(routing_id)     # gone: it announces itself again if it comes back
            # The serving worker's process exited (killed, crashed): its TCP connection closed, which ZeroMQ saw at
            # once; the engine need not wait out worker_timeout_s of silence to know.
            self.serving_gone = self.serving_gone or routing_id == self._serving.encode()
            return False
        return True

    def _take_announcements(self) -> None:
        """Adds the routing id of each worker that announced itself (a WorkerHello on its DEALER) since the last call;
        a frame that is no hello is dropped."""
        while True:
            try:
                parts = self.send_to_worker.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                if len(parts) == 2 and decode(parts[1]).WhichOneof("kind") == "hello":
                    self.workers.add(parts[0])
            except WireError:
                pass

    async def recv(self):
        """Waits for the next WorkerMessage (raises WireError on a bad frame)."""
        return decode(await self.recv_from_worker.recv())

    def close(self) -> None:
        """Closes both sockets (send_to_worker, recv_from_worker)."""
        self.send_to_worker.close()
        self.recv_from_worker.close()
