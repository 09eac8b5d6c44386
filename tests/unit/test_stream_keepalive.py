"""Streams keep the wire alive whenever nothing was written for SPARKINFER_SSE_KEEPALIVE_SECONDS, also while tokens
keep coming but give no frame (a tool call is held back until it is whole), on every SSE API; Ollama's NDJSON has no
keep-alive and stays silent."""
import time

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

KEEPALIVE_S = 0.2
TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"content": {"type": "string", "maxLength": 1000}}}}}]
CONTENT = "hello world " * 12
# A call that takes about 2 s to generate (about 70 tokens at 30 ms), none of it sent before its value is whole (a
# string with a bound goes out as the parameter closes; a plain one would stream as it comes, tool_stream).
CALL = f"<tool_call>\n<function=write_file>\n<parameter=content>\n{CONTENT}\n</parameter>\n</function>\n</tool_call>"
USER = [{"role": "user", "content": "write it"}]
SCHEMA = TOOLS[0]["function"]["parameters"]
# Thinking off: the call is the answer, each of its tokens a Delta that gives no frame until the call is whole.
ROUTES = {
    "chat": ("/v1/chat/completions", {"messages": USER, "tools": TOOLS, "enable_thinking": False}, b": keep-alive"),
    "lmstudio": ("/api/v0/chat/completions", {"messages": USER, "tools": TOOLS, "enable_thinking": False},
                 b": keep-alive"),
    "responses": ("/v1/responses", {"input": "write it", "reasoning": {"effort": "none"},
                                    "tools": [{"type": "function", "name": "write_file", "parameters": SCHEMA}]},
                  b"event: keepalive"),
    "anthropic": ("/v1/messages", {"model": "fake-model", "messages": USER, "max_tokens": 500,
                                   "thinking": {"type": "disabled"},
                                   "tools": [{"name": "write_file", "input_schema": SCHEMA}]}, b"event: ping"),
}


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    fake.script.reply, fake.script.delay_s = CALL, 0.03
    async with fake_gateway(fake, sse_keepalive_s=KEEPALIVE_S) as pair:
        yield pair


async def _lines(response, started: float) -> list:
    """(seconds since `started`, line) of every non-empty line of a streamed body."""
    return [(time.monotonic() - started, line.rstrip(b"\n")) async for line in response.content if line.strip()]


@pytest.mark.parametrize("route", list(ROUTES))
async def test_a_tool_call_forming_gets_keep_alives(stack, route):
    client, _ = stack
    path, body, ping = ROUTES[route]
    started = time.monotonic()
    async with client.post(path, data=orjson.dumps({**body, "stream": True})) as response:
        assert response.status == 200
        lines = await _lines(response, started)
    pings = [at for at, line in lines if line.startswith(ping)]
    # Before: no keep-alive at all while the call formed (tokens kept coming), 2 s of silence on the wire.
    assert len(pings) >= 4, lines
    # no silence as long as the call takes to form (~2 s): a loose bound, since a loaded CI machine can stall the event
    # loop for several keep-alive periods (one run here saw a gap over 4 x KEEPALIVE_S); the ping count is the check
    gaps = [b - a for a, b in zip([0.0] + [at for at, _ in lines], [at for at, _ in lines])]
    assert max(gaps) < 1.5, gaps
    text = b"\n".join(line for _, line in lines).decode()
    assert "write_file" in text and CONTENT.strip() in text.replace("\\n", "\n")


async def test_a_responses_stream_keeps_alive_with_openais_numbered_keepalive_event(stack):
    """OpenAI's own keep-alive on /v1/responses is an event (`event: keepalive`, data {"type": "keepalive",
    "sequence_number": N}), numbered with the others; Codex reads the stream with eventsource-stream, which drops SSE
    comments, so the `: keep-alive` comment sent before never reset its idle timer (300 s by default)."""
    client, _ = stack
    path, body, _ = ROUTES["responses"]
    async with client.post(path, data=orjson.dumps({**body, "stream": True})) as response:
        raw = await response.read()
    assert b": keep-alive" not in raw
    events = [orjson.loads(block.split(b"\ndata: ", 1)[1]) for block in raw.split(b"\n\n") if block.strip()]
    keepalives = [e for e in events if e["type"] == "keepalive"]
    assert len(keepalives) >= 4 and all(set(e) == {"type", "sequence_number"} for e in keepalives)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"


async def test_ollama_ndjson_stays_silent_without_keep_alives(stack):
    client, _ = stack
    async with client.post("/api/chat", data=orjson.dumps({"model": "fake-model", "messages": USER,
                                                           "tools": TOOLS, "think": False})) as response:
        lines = [line for _, line in await _lines(response, time.monotonic())]
    parsed = [orjson.loads(line) for line in lines]           # every line is an Ollama object: no comment lines
    calls = [p["message"]["tool_calls"] for p in parsed if p["message"].get("tool_calls")]
    assert parsed[-1]["done"] is True and calls[0][0]["function"]["arguments"] == {"content": CONTENT}
