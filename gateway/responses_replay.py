"""Gateway process: a background response's event stream, kept while it runs so that it can be read from any point,
as OpenAI's background mode streams it (create with background and stream true; GET /v1/responses/{id}?stream=true
&starting_after=N resumes after the event numbered N: the openai SDKs' responses.retrieve(..., stream=True,
starting_after=N); vLLM's responses_background_stream_generator replays its event deque so).

The response's generation runs in its own task (gateway/responses.py), which writes its events (numbered from 0 by
ResponsesFramer, so event N is frame N) into an EventLog; a reader writes the log's frames to its client from where it
asked and follows the new ones, with an SSE comment every keep-alive period of silence. A reader that leaves stops
nothing: the response runs on, to be read again or polled. An ended response's log is kept too (EndedLogs: bounded,
least recently used out), so that a client whose connection dropped resumes it after the end, as vLLM keeps its
event_store entries past the end. A long response's log keeps its newest events within MAX_LOG_BYTES.
"""
from __future__ import annotations

import asyncio

from aiohttp import web

from gateway.engine import Generation, Usage
from gateway.errors import ApiError, InvalidRequest
from gateway.generation import NOT_READY
from gateway.http_stream import open_stream
from gateway.responses_stream import ResponsesFramer
from gateway.sized_lru import SizedLru

KEEPALIVE = b": keep-alive\n\n"
# Bytes of frames the logs of ended background responses hold in all.
MAX_ENDED_BYTES = 32 * 1024 * 1024


# The bytes of events one response keeps (a long response's oldest half goes past it): at ~200 bytes an output
# token's event, some 40000 tokens' worth.
MAX_LOG_BYTES = 8 * 1024 * 1024


class EventLog:
    """The frames of one response's events, in order (frames[0] is event number `start`), and whether it ended;
    readers wait for the next ones. Past max_bytes the oldest half is let go."""

    def __init__(self, max_bytes: int = MAX_LOG_BYTES):
        self.frames: list[bytes] = []
        self.start = 0
        self.num_bytes, self.max_bytes = 0, max_bytes
        self.done = False
        self._event = asyncio.Event()

    @property
    def end(self) -> int:
        """The number of the next event."""
        return self.start + len(self.frames)

    def since(self, index: int) -> list:
        """The frames of the events from number `index` on (index at least start)."""
        return self.frames[index - self.start:]

    def add(self, frames: list) -> None:
        if frames:
            self.frames += frames
            self.num_bytes += sum(len(frame) for frame in frames)
            if self.num_bytes > self.max_bytes:
                half = len(self.frames) // 2
                self.num_bytes -= sum(len(frame) for frame in self.frames[:half])
                self.frames, self.start = self.frames[half:], self.start + half
            self._wake()

    def finish(self) -> None:
        self.done = True
        self._wake()

    def _wake(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, timeout: float) -> None:
        """Until a frame is added or the response ends, or timeout s."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except asyncio.TimeoutError:
            pass


class EndedLogs(SizedLru):
    """Response id -> the event log of a background response that ended, for a stream resumed after its end; least
    recently used out past max_bytes of frames in all (get and drop as SizedLru's)."""

    def __init__(self, max_bytes: int = MAX_ENDED_BYTES):
        super().__init__(max_bytes)

    def keep(self, response_id: str, log: EventLog) -> None:
        self.put(response_id, log, sum(map(len, log.frames)))


async def record(log: EventLog, framer: ResponsesFramer, gen: Generation) -> None:
    """Runs gen to its end, its events into the log as a stream would write them (a failure: error, response.failed);
    the scheduler calls are closed on the way out, also when the task is cancelled."""
    try:
        sent = gen.sent_usage()
        log.add(framer.start(Usage(sent.prompt_tokens, 0, sent.cached_tokens, sent.per_prompt)))
        while (delta := await gen.next()) is not None:
            if delta is not NOT_READY:
                log.add(framer.delta(delta, gen.sent_usage()))
        log.add(framer.end(gen.usage()))
    except ApiError as exc:
        log.add(framer.error(exc, gen.usage()))
    finally:
        await gen.close()
        log.finish()


def _gone(after: int, log: EventLog) -> InvalidRequest:
    return InvalidRequest(f"Invalid 'starting_after': {after}; the events before number {log.start} of this "
                          f"response are no longer kept (a long response keeps its newest ones)",
                          param="starting_after")


async def replay(request: web.Request, log: EventLog, after: int, keepalive_s: float) -> web.StreamResponse:
    """Streams the log's events after the one numbered `after` (-1: all), then each new one until the response
    ends; 400 when the first of them is no longer kept (a reader that falls that far behind is ended)."""
    index = max(after + 1, 0)
    if index < log.start:
        raise _gone(after, log)
    response = await open_stream(request, ResponsesFramer.content_type, ResponsesFramer.headers)
    while index >= log.start:
        frames = log.since(index)
        for frame in frames:
            await response.write(frame)
        index += len(frames)
        if not frames and log.done:
            break
        if not frames:
            await log.wait(keepalive_s)
            if log.end == index and not log.done:
                await response.write(KEEPALIVE)
    await response.write_eof()
    return response
