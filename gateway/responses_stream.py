"""Gateway process: /v1/responses SSE framing (named events with sequence numbers) and the non-streamed answer.

OpenAI streams a response as `event: <type>` + `data: {json}` pairs, every event numbered by sequence_number,
with no [DONE] line: response.created and response.in_progress first, the output items' events, and
response.completed (response.incomplete when max_output_tokens cut it; after a failure, error then
response.failed) last. A silent stream gets OpenAI's `keepalive` event, numbered with the others.
"""
from __future__ import annotations

from gateway import json_out
from gateway.engine import Delta, Generation, Usage
from gateway.errors import ApiError
from gateway.openai_shape import SSE_HEADERS
from gateway.responses_run import ResponseRun


class ResponsesFramer:
    """The stream_generation framer of a Responses stream: each event framed and numbered."""
    content_type = "text/event-stream; charset=utf-8"
    headers = SSE_HEADERS

    def __init__(self, run: ResponseRun):
        self.run = run
        self._sequence = 0

    def _frames(self, events: list) -> list[bytes]:
        frames = []
        for event in events:
            event["sequence_number"] = self._sequence
            self._sequence += 1
            frames.append(b"event: " + event["type"].encode() + b"\ndata: " + json_out.event_dumps(event) + b"\n\n")
        return frames

    def start(self, usage: Usage) -> list[bytes]:
        """response.created and response.in_progress with the response in_progress."""
        opening = self.run.response(None, "in_progress")
        return self._frames([{"type": "response.created", "response": opening},
                             {"type": "response.in_progress", "response": opening}])

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """The output item, content part and text / reasoning / function-call delta events of one Delta."""
        return self._frames(self.run.push(delta))

    def end(self, usage: Usage) -> list[bytes]:
        """The open items done, then response.completed (response.incomplete when cut at the limit) with usage."""
        return self._frames(self.run.finish_events(usage))

    def error(self, error: ApiError, usage: Usage) -> list[bytes]:
        """OpenAI's `error` event, then response.failed with the error."""
        return self._frames(self.run.failed_events(error, usage))

    def keepalive(self) -> bytes:
        """OpenAI's numbered `keepalive` event (an SSE comment does not reset Codex's idle timer)."""
        # OpenAI's own keep-alive on a silent Responses stream: a numbered `keepalive` event. Codex reads the stream
        # with eventsource-stream, which drops SSE comments, and times out on its idle timer (300 s by default) unless
        # an event comes: a `: keep-alive` comment kept the connection alive but not Codex.
        return self._frames([{"type": "keepalive"}])[0]


async def complete(run: ResponseRun, gen: Generation) -> dict:
    """Runs gen to the end through the same builder as the stream; cancels gen if the caller is cancelled."""
    await gen.drain(run.push)
    run.output.close(run.item_status)
    run.output.close_call(run.item_status)
    return run.done(gen.usage())
