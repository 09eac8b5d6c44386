"""Scheduler <-> worker boundary, scheduler side: ZeroMQ sockets and the one-protobuf-frame codec (no pickle).

Topology: the scheduler binds both sockets, the worker connects, so either may start first and a worker
may come and go. Steps and pings leave on send_to_worker (PUSH, port P of SPARKINFER_WORKER_ADDR);
results and hellos arrive on recv_from_worker (PULL, port P + 1). Every frame is one serialized
pb.WorkerMessage with exactly one field of its `kind` oneof set.
"""

import zmq
import zmq.asyncio

from proto import frames, pb
from proto.frames import WireError, encode, split_addr  # noqa: F401  (re-exported)


def decode(frame: bytes):
    """Returns the pb.WorkerMessage in a worker's `frame`; raises WireError if it does not parse or carries nothing."""
    return frames.decode(frame, "worker")


class WorkerLink:
    """The scheduler's two bound sockets, used from one asyncio event loop."""

    def __init__(self, worker_addr: str, bind_host: str, context=None):
        _, step_port, result_port = split_addr(worker_addr)
        self.context = context or zmq.asyncio.Context.instance()
        # Sends never wait (NOBLOCK), so a plain socket does; an asyncio one would wrap errors in futures.
        self.send_to_worker = zmq.Context.instance().socket(zmq.PUSH)
        self.recv_from_worker = self.context.socket(zmq.PULL)
        for sock in (self.send_to_worker, self.recv_from_worker):
            sock.setsockopt(zmq.LINGER, 0)
        # Steps never queue for a worker that is gone: a send with no peer fails at once.
        self.send_to_worker.setsockopt(zmq.SNDHWM, 64)
        self.send_to_worker.bind(f"tcp://{bind_host}:{step_port}")
        self.recv_from_worker.bind(f"tcp://{bind_host}:{result_port}")

    def send(self, msg) -> bool:
        """Sends one WorkerMessage without blocking; False when no worker is connected."""
        try:
            self.send_to_worker.send(encode(msg), flags=zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    async def recv(self):
        """Waits for the next WorkerMessage (raises WireError on a bad frame)."""
        return decode(await self.recv_from_worker.recv())

    def close(self) -> None:
        """Closes both sockets (send_to_worker, recv_from_worker)."""
        self.send_to_worker.close()
        self.recv_from_worker.close()
