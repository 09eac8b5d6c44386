"""Scheduler <-> worker boundary: one WorkerMessage per ZeroMQ frame, and the tcp://host:P (+1) address pair.

Shared by scheduler/wire.py and worker/wire.py so both ends decode and split addresses the same way.
"""
from urllib.parse import urlsplit

from proto import pb


class WireError(Exception):
    """A frame that is not a valid WorkerMessage."""


def encode(msg) -> bytes:
    """pb.WorkerMessage -> one frame (protobuf bytes; never pickle)."""
    return msg.SerializeToString()


def decode(frame: bytes, peer: str = "peer"):
    """Returns the pb.WorkerMessage in `frame`; raises WireError if it does not parse or carries nothing."""
    msg = pb.WorkerMessage()
    try:
        msg.ParseFromString(frame)
    except Exception as exc:
        raise WireError(f"undecodable {peer} frame ({len(frame)} bytes): {exc}") from exc
    if msg.WhichOneof("kind") is None:
        raise WireError(f"{peer} frame ({len(frame)} bytes) has no message set")
    return msg


def split_addr(addr: str) -> tuple:
    """tcp://host:P -> (host, P, P + 1): the step port and the result port. Raises ValueError if malformed."""
    parts = urlsplit(addr)
    if parts.scheme != "tcp" or not parts.hostname or not parts.port:
        raise ValueError(f"worker address {addr!r} is not tcp://host:port")
    return parts.hostname, parts.port, parts.port + 1
