"""Scheduler process: the response streams of the admitted requests, with the API requests (group_ids) they are
choices of counted, so that admission asks whether another choice of a request is admitted without a scan."""
import asyncio
from collections import Counter
from dataclasses import dataclass

from scheduler.request import Request

_MISSING = object()


@dataclass
class Stream:
    req: Request
    queue: asyncio.Queue   # pb.GenerateResponse items, or a RequestError that ends the stream
    group_id: str = ""     # GenerateRequest.group_id: the API request it is one choice of


class Streams(dict):
    """req_id -> Stream, a dict (the engine, the server's drain and the liveness code read it as one) that keeps the
    number of streams of each group_id. Admission scanned every stream for the new request's group (the gateway
    sends one with each request): O(n^2) over a burst, 0.26 s of the scheduler's loop for 2000 requests."""

    def __init__(self):
        super().__init__()
        self._groups = Counter()

    def __setitem__(self, req_id: str, stream: Stream) -> None:
        self.pop(req_id)
        super().__setitem__(req_id, stream)
        if stream.group_id:
            self._groups[stream.group_id] += 1

    def pop(self, req_id: str, default=None):
        """dict.pop that also uncounts the stream's group_id."""
        stream = super().pop(req_id, _MISSING)
        if stream is _MISSING:
            return default
        if stream.group_id:
            self._groups[stream.group_id] -= 1
            if not self._groups[stream.group_id]:
                del self._groups[stream.group_id]
        return stream

    def clear(self) -> None:
        """dict.clear and the group counts with it."""
        super().clear()
        self._groups.clear()

    def has_group(self, group_id: str) -> bool:
        """Whether a stream of `group_id` (non-empty) is admitted."""
        return bool(group_id) and group_id in self._groups
