"""A server bug once a stream's headers are out ends the stream with the API's own error frame: the error middleware's
500 was written into the open chunked body as a second HTTP response ("illegal chunk header"), and the stream had no
end ([DONE], Ollama's last line): the client waited forever (the timeout marks turn that hang into a failure)."""
import json

import pytest

from gateway.ollama_stream import NdjsonFramer
from gateway.completion_shape import CompletionFramer
from gateway.chat_stream import ChatFramer

REPLY = "Hello world, this is a test."


def _broken(framer_class, monkeypatch):
    original = framer_class.delta
    calls = []

    def delta(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("framer bug")
        return original(self, *args)
    monkeypatch.setattr(framer_class, "delta", delta)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path, framer, body", [
    ("/v1/chat/completions", ChatFramer, {"messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/completions", CompletionFramer, {"prompt": "hi"})])
async def test_sse_stream_ends_with_an_error_event(stack, monkeypatch, path, framer, body):
    client, _ = stack
    _broken(framer, monkeypatch)
    response = await client.post(path, json={"model": "fake-model", "stream": True, **body})
    assert response.status == 200
    raw = (await response.read()).decode()
    events = [line[6:] for line in raw.split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and "HTTP/1.1 500" not in raw
    error = json.loads(events[-2])["error"]
    assert error["type"] == "server_error" and error["code"] == "internal_error" and "framer bug" in error["message"]


@pytest.mark.timeout(30)
async def test_ollama_stream_ends_with_an_error_line(stack, monkeypatch):
    client, _ = stack
    _broken(NdjsonFramer, monkeypatch)
    response = await client.post("/api/generate", json={"model": "fake-model", "prompt": "hi", "raw": True})
    assert response.status == 200
    lines = [json.loads(line) for line in (await response.read()).decode().splitlines() if line]
    assert "framer bug" in lines[-1]["error"]
