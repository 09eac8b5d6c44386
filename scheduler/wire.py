"""Scheduler <-> worker boundary, scheduler side: ZeroMQ sockets and the one-protobuf-frame codec (no pickle).

Topology: the scheduler binds both sockets, the worker connects, so either may start first and a worker
may come and go. Steps and pings leave on send_to_worker (PUSH, port P of SPARKINFER_WORKER_ADDR);
results and hellos arrive on recv_from_worker (PULL, port P + 1). Every frame is one serialized
pb.WorkerMessage with exactly one field of its `kind` oneof set.
"""
from urllib.parse import urlsplit

import zmq
import zmq.asyncio

from proto import pb


class WireError(Exception):
    """A frame that is not a valid WorkerMessage."""


def encode(msg) -> bytes:
    return msg.SerializeToString()


def decode(frame: bytes):
    """Returns the pb.WorkerMessage in `frame`; raises WireError if it does not parse or carries nothing."""
    msg = pb.WorkerMessage()
    try:
        msg.ParseFromString(frame)
    except Exception as exc:
        raise WireError(f"undecodable worker frame ({len(frame)} bytes): {exc}") from exc
    if msg.WhichOneof("kind") is None:
        raise WireError(f"worker frame ({len(frame)} bytes) has no message set")
    return msg


def split_addr(addr: str) -> tuple:
    """tcp://host:P -> (host, P, P + 1): the step port and the result port. Raises ValueError if malformed."""
    parts = urlsplit(addr)
    if parts.scheme != "tcp" or not parts.hostname or not parts.port:
        raise ValueError(f"worker address {addr!r} is not tcp://host:port")
    return parts.hostname, parts.port, parts.port + 1


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
        self.send_to_worker.close()
        self.recv_from_worker.close()
