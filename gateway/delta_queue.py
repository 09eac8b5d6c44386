"""Gateway process: a running request's queue of Deltas, which folds a choice's Deltas into one while its reader lags.

The choices' scheduler calls read their token streams as fast as the model writes them, and a stream's writer takes
the Deltas as fast as its client reads (aiohttp's write waits while the socket is full). A client that reads slowly,
or stops reading without closing, left one Delta object (about 380 bytes) a token in the queue, up to the whole answer:
100 MB for a 262k-token one. vLLM's RequestOutputCollector (vllm/v1/engine/output_processor.py) merges the outputs a
slow consumer has not taken into one instead; so does this queue, once MERGE_DEPTH items wait: a Delta joins the last
one queued of the same choice (its text as one string, its ids and logprobs in one list), so a lagging client gets
the same text in fewer, larger chunks, as from vLLM, and costs the text and ids of what it has not read.
"""
from __future__ import annotations

import asyncio

from gateway.pipeline import Delta

# Items waiting before a new Delta is folded into the last one: the writer is that far behind the model.
MERGE_DEPTH = 64
# Text pieces a run keeps before it joins them into one string (joining on every piece copied the whole text each time).
_JOIN_EVERY = 256


class _Run:
    """Consecutive Deltas of one choice folded into the first, as one Delta that carries them all."""

    __slots__ = ("delta", "_content", "_reasoning", "_kind")

    def __init__(self, first: Delta):
        self.delta = first
        self._content, self._reasoning = [first.content], [first.reasoning]
        # (has answer text, has thinking text)
        self._kind = (bool(first.content), bool(first.reasoning))

    def takes(self, new: Delta) -> bool:
        """Whether `new` can follow in the same Delta: the same choice, not after its last Delta, not the first of a
        choice (prompt_logprobs), and text of the run's one kind, thinking or answer (a Delta of both is a run of its
        own), so that every consumer sees the text, ids and logprobs in the order and on the side they were written."""
        head = self.delta
        if new.index != head.index or head.finish_reason or new.prompt_logprobs is not None:
            return False
        if not (new.content or new.reasoning):
            return True
        return self._kind == (bool(new.content), bool(new.reasoning)) and self._kind != (True, True)

    def add(self, new: Delta) -> None:
        head = self.delta
        self._content.append(new.content)
        self._reasoning.append(new.reasoning)
        head.logprobs.extend(new.logprobs)
        head.token_ids.extend(new.token_ids)
        head.finish_reason, head.stop_reason = new.finish_reason, new.stop_reason
        head.num_tokens, head.num_reasoning_tokens = new.num_tokens, new.num_reasoning_tokens
        if len(self._content) >= _JOIN_EVERY:
            self._content, self._reasoning = ["".join(self._content)], ["".join(self._reasoning)]

    def take(self) -> Delta:
        """The folded Delta."""
        self.delta.content, self.delta.reasoning = "".join(self._content), "".join(self._reasoning)
        return self.delta


class DeltaQueue(asyncio.Queue):
    """asyncio.Queue of a Generation's items (Deltas and markers) whose put folds a Delta into the last item once
    MERGE_DEPTH items wait (_put is the hook asyncio's own LifoQueue and PriorityQueue override); items are taken with
    unfold()."""

    def _put(self, item) -> None:
        queue = self._queue
        if len(queue) >= MERGE_DEPTH and isinstance(item, Delta):
            last = queue[-1]
            run = last if isinstance(last, _Run) else _Run(last) if isinstance(last, Delta) else None
            if run is not None and run.takes(item):
                run.add(item)
                queue[-1] = run
                return
        queue.append(item)


def unfold(item):
    """A queue item as it is handed out: a folded run as its one Delta, anything else as it is."""
    return item.take() if isinstance(item, _Run) else item
