"""A <tool_call> in the answer that opens no call (no <function= or JSON object's first key after it: prose about the
markup), and a bare <function=NAME> that words follow on its line ("use <function=f> to ..."), are answer text: a stream sends the text after it as it comes, and a call later in the answer is still read, with the
text before it kept. A stream held everything after such a mention to the end of the answer (the silence of
club-3090#72 / vllm-project/vllm#22975), and the whole answer lost the text from the mention to the call (fake
scheduler; /v1 and /api/chat, streamed and whole)."""
import json

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.tool_filter import ToolCallFilter
from tests.unit.tool_deltas import join_calls

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "integer"}}}}}]
CALL = "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"
PROSE = "A call starts with <tool_call> and then a function block. " + "More words. " * 5
# Mentions that held the rest of a stream to its end: a bare <function= of an offered tool, a JSON form's brace.
MENTIONS = {"tag": PROSE, "function": "Use <function=f> to call it, then read its answer. " + "More words. " * 5,
            "brace": "Calls look like <tool_call>{...}</tool_call> in the output. " + "More words. " * 5}


@pytest.mark.parametrize("prose", MENTIONS.values(), ids=MENTIONS.keys())
def test_the_text_after_a_mention_streams_piece_by_piece(prose):
    stream = ToolCallFilter(TOOLS)
    sent = [stream.push(prose[i:i + 4]) for i in range(0, len(prose), 4)]
    # Only the pieces right around the tag wait (for what follows it): the rest comes out as it is pushed.
    assert sum(1 for piece in sent if piece) >= len(sent) - 3
    assert "".join(sent) + stream.finish("stop")[0] == prose


@pytest.mark.parametrize("tail", ["<tool_call>", "<tool_call>\n", "<tool_call>\n<func"], ids=["tag", "newline", "part"])
def test_a_tag_at_the_end_is_held_until_it_shows_what_it_is(tail):
    stream = ToolCallFilter(TOOLS)
    assert stream.push("Look: " + tail) == "Look:"
    assert stream.finish("stop", stop_string=True) == (" " + tail, None)
    # Where the model's end token ended the output there, it is a call's opener the end token cut: markup, as vLLM's
    # qwen3_coder and Ollama's parser drop it (tests/unit/test_tool_call_cut_tags.py).
    stream = ToolCallFilter(TOOLS)
    assert stream.push("Look: " + tail) == "Look:"
    assert stream.finish("stop") == ("", None)


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    async with fake_gateway(fake) as pair:
        yield pair


async def _v1(client, stream: bool) -> tuple:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
            "enable_thinking": False, "stream": stream}
    response = await client.post("/v1/chat/completions", json=body)
    if not stream:
        message = (await response.json())["choices"][0]["message"]
        return [message["content"]], [c["function"]["arguments"] for c in message["tool_calls"] or []]
    pieces, deltas = [], []
    for line in (await response.read()).decode().split("\n"):
        if line.startswith("data: {"):
            for choice in orjson.loads(line[6:])["choices"]:
                pieces += [choice["delta"]["content"]] if choice["delta"].get("content") else []
                deltas += choice["delta"].get("tool_calls") or []
    return pieces, [c["function"]["arguments"] for c in join_calls(deltas)]


@pytest.mark.parametrize("prose", MENTIONS.values(), ids=MENTIONS.keys())
async def test_a_mention_streams_and_a_later_call_is_read(stack, prose):
    client, fake = stack
    fake.script.reply = prose + "Now:\n" + CALL
    text = prose + "Now:"
    whole, calls = await _v1(client, False)
    assert whole == [text] and [json.loads(c) for c in calls] == [{"x": 1}]
    pieces, calls = await _v1(client, True)
    assert "".join(pieces) == text and [json.loads(c) for c in calls] == [{"x": 1}]
    # One byte-level token a chunk: the text after the mention is not one chunk held to the end.
    assert max(len(piece) for piece in pieces) < 20
    objects = [orjson.loads(line) for line in (await (await client.post("/api/chat", json={
        "model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "think": False,
        "stream": True})).read()).splitlines()]
    assert "".join(o["message"]["content"] for o in objects) == text
    assert max(len(o["message"]["content"]) for o in objects) < 20
    assert [c["function"]["arguments"] for o in objects for c in o["message"].get("tool_calls", [])] == [{"x": 1}]


@pytest.mark.parametrize("size", [1, 5, 1000], ids=["per-char", "5", "whole"])
def test_an_opening_tag_written_twice_still_opens_the_call(size):
    text = "ok\n<tool_call>\n" + CALL
    stream = ToolCallFilter(TOOLS)
    sent = "".join(stream.push(text[i:i + size]) for i in range(0, len(text), size))
    rest, calls = stream.finish("stop")
    assert sent + rest == "ok" and [json.loads(c["function"]["arguments"]) for c in calls] == [{"x": 1}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_mention_in_the_text_after_a_call_closed_by_its_function(stack, stream):
    """A call the model closed with </function> alone, then answer text that mentions the tag: the whole answer read
    no call (the mention counted as a next call, so the text was no answer text) and a stream sent the call and
    dropped the text. Both are the call and the text, as without the mention."""
    client, fake = stack
    fake.script.reply = CALL.removesuffix("\n</tool_call>") + "Some text <tool_call> is a tag "
    pieces, calls = await _v1(client, stream)
    assert "".join(pieces) == "Some text <tool_call> is a tag" and [json.loads(c) for c in calls] == [{"x": 1}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_opening_tag_written_twice_opens_a_json_call_too(stack, stream):
    """The tag written twice before a Hermes JSON call: a stream read the call (opens_call skips the second tag) and
    the whole answer read none, handing the markup out as text."""
    client, fake = stack
    fake.script.reply = '<tool_call>\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'
    pieces, calls = await _v1(client, stream)
    assert "".join(p or "" for p in pieces) == "" and [json.loads(c) for c in calls] == [{"x": 1}]
