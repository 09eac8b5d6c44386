"""A JSON (Hermes) tool call, the form Qwen3-Next and Qwen3 write ({"name": ..., "arguments": {...}} after
<tool_call>), streams its arguments as the model writes them, as the XML form does (4fbae41): it came whole once its
</tool_call> was read, so a coding agent writing a file through such a model showed nothing until the end
(lmstudio-bug-tracker#1868, vllm#30439 for the XML form; vLLM's hermes parser streams the arguments as they come).
The pieces join to exactly the arguments of the whole reading."""
import json

import orjson
import pytest

from gateway.tool_stream import ToolCallStream
from tests.unit.anthropic_sse import accumulate, parse_events
from tests.unit.tool_deltas import chunk_calls
from tests.unit.test_tool_call_arguments_stream import TOOLS, streamed, whole

FILE = 'def f(x):\n    return "a\\tb" + \'</tool_call>\'\n\u00e9\U0001F600 \\ "q"\n' * 3
ARGUMENTS = {"path": "/tmp/a.py", "mode": 644, "content": FILE, "meta": {"k": [1, None]}}
CALL = '<tool_call>\n{"name": "write_file", "arguments": ' + json.dumps(ARGUMENTS) + '}\n</tool_call>'
ESCAPED = CALL.replace(json.dumps(ARGUMENTS), json.dumps(ARGUMENTS, ensure_ascii=True, indent=2))
# The arguments as the JSON text of the object (double-encoded, as OpenAI's own messages carry them): they came whole
# at the call's end, and as that text as written.
DOUBLE = CALL.replace(json.dumps(ARGUMENTS), json.dumps(json.dumps(ARGUMENTS, indent=1)))


@pytest.mark.parametrize("text", [CALL, ESCAPED, "Writing.\n" + CALL + "\n" + CALL, DOUBLE],
                         ids=["plain", "escaped", "two", "double-encoded"])
@pytest.mark.parametrize("size", [1, 3, 8])
def test_the_arguments_stream_before_the_call_ends(text, size):
    content, calls, log = streamed(text, size)
    assert (content, calls) == whole(text)
    end = text.index("}\n</tool_call>")
    before = "".join(delta.arguments for at, delta in log if delta.index == 0 and at <= end)
    # The path, the mode and the file's text went out before the call's end.
    assert before.startswith('{"path":"/tmp/a.py","mode":644,"content":' + json.dumps(FILE, ensure_ascii=False)[:-1])
    assert json.loads(calls[0][1]) == ARGUMENTS


def test_the_name_waits_until_it_is_whole():
    stream = ToolCallStream(TOOLS)
    assert stream.push('<tool_call>\n{"name": "write_fi')[1] == []
    assert stream.push('le", "argu')[1] == []
    deltas = stream.push('ments": {"path": "/t')[1]
    assert [(d.name, d.arguments) for d in deltas] == [("write_file", ""), (None, '{"path":"/t')]


async def test_every_route_streams_the_pieces(stack):
    client, fake = stack
    fake.script.reply = CALL
    body = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "stream": True,
            "enable_thinking": False}
    raw = await (await client.post("/v1/chat/completions", data=orjson.dumps(body))).read()
    chunks = [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]
    pieces = [c for chunk in chunks for c in chunk["choices"][0]["delta"].get("tool_calls") or []]
    assert len(pieces) > 20 and json.loads(chunk_calls(chunks)[0]["function"]["arguments"]) == ARGUMENTS
    anthropic = {"model": "default", "max_tokens": 700, "messages": body["messages"], "stream": True,
                 "thinking": {"type": "disabled"},
                 "tools": [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS]}
    events = parse_events(await (await client.post("/v1/messages", data=orjson.dumps(anthropic))).read())
    assert len([name for name, _ in events if name == "content_block_delta"]) > 20
    assert [b["input"] for b in accumulate(events)["content"] if b["type"] == "tool_use"] == [ARGUMENTS]
