"""A stream's writer writes the Deltas queued while it wrote in order, each framed with the usage sent up to it, one
frame a write (one HTTP chunk an event, as vLLM, llama-server and Ollama send them); a failure behind them still
comes after their frames."""
import pytest

from gateway.errors import Unavailable
from gateway.gen_request import Usage
from gateway.http_stream import _pump
from gateway.pipeline import Delta


class Response:
    def __init__(self):
        self.writes = []

    async def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))


class QueuedGen:
    """Generation's reading side over items all queued already (Deltas, then None for the end, or an error)."""

    def __init__(self, items):
        self.items, self.num_sent = list(items), 0

    async def next(self, timeout=None):
        return self._take()

    def _take(self):
        item = self.items.pop(0)
        if isinstance(item, Exception):
            raise item
        self.num_sent += item is not None
        return item

    def sent_usage(self) -> Usage:
        return Usage(5, self.num_sent)

    def usage(self) -> Usage:
        return Usage(5, self.num_sent)


class Framer:
    """One frame a Delta, naming its text and the completion tokens of the usage it was framed with."""

    def delta(self, delta, usage):
        return [f"{delta.content}@{usage.completion_tokens};".encode()]

    def end(self, usage):
        return [b"end;", b"[DONE]"]

    def keepalive(self):
        return b"ping;"


async def test_queued_deltas_go_out_in_order_one_frame_a_write():
    response, deltas = Response(), [Delta(0, content=word) for word in ("a", "b", "c", "d")]
    gen = QueuedGen(deltas[1:] + [None])
    await _pump(response, gen, Framer(), deltas[0], keepalive_s=10.0)
    # 2e72557 glued them in one write (one HTTP chunk): a client reading an event a chunk got broken JSON.
    assert response.writes == [b"a@0;", b"b@1;", b"c@2;", b"d@3;", b"end;", b"[DONE]"]


async def test_a_failure_behind_queued_deltas_comes_after_their_frames():
    response, deltas = Response(), [Delta(0, content=word) for word in ("a", "b")]
    gen = QueuedGen(deltas[1:] + [Unavailable("worker lost")])
    with pytest.raises(Unavailable):
        await _pump(response, gen, Framer(), deltas[0], keepalive_s=10.0)
    assert b"".join(response.writes) == b"a@0;b@1;"
