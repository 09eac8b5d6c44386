"""SSE events carry U+2028 and U+2029 escaped (fake scheduler). KoboldAI Lite reads an OpenAI-compatible stream with
/^data: ?(.*)(\\r?\\n){2}/m (index.html oai_api_stream_sse), whose JavaScript `.` stops at U+2028 and U+2029: an event
holding one raw did not match and was skipped, its text lost. The regex is run here as JavaScript reads it."""
import json
import re

import pytest

REPLY = "a\u2028b\u2029c"
# JavaScript's `.` (no s flag): any character but \n, \r, U+2028 and U+2029; `^` with m after any of them.
JS_EVENT = re.compile("(?:^|(?<=[\n\r\u2028\u2029]))data: ?([^\n\r\u2028\u2029]*)(\r?\n){2}")


def lite_events(raw: str) -> list:
    """The events Lite's transform takes out of the stream, as its loop does (each match drops what came before)."""
    events, buf = [], raw
    while (m := JS_EVENT.search(buf)) is not None:
        if m.group(1) != "[DONE]":
            events.append(json.loads(m.group(1)))
        buf = buf[m.end():]
    return events


@pytest.mark.parametrize("path, body, text", [
    ("/v1/completions", {"prompt": "hi"}, lambda e: e["choices"][0]["text"] if e["choices"] else ""),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "enable_thinking": False},
     lambda e: (e["choices"][0]["delta"].get("content") or "") if e["choices"] else ""),
], ids=["completions", "chat"])
async def test_lite_reads_every_event(stack, path, body, text):
    client, _ = stack
    response = await client.post(path, json={**body, "max_tokens": 32, "stream": True})
    raw = (await response.read()).decode()
    assert "\u2028" not in raw and "\u2029" not in raw
    assert "".join(text(event) for event in lite_events(raw)) == REPLY
