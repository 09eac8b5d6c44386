"""A <tool_call> the model shows inside a Markdown fenced code block (``` or ~~~, CommonMark's fences) is an example of
the format, answer text, not a call, streamed or not, as vLLM's Qwen3 parser reads it (vllm-project/vllm#57541,
tests/parser/engine/test_qwen3_fenced_examples.py). Here the example was handed out as a call (an agent would run
it) and the answer kept only its fences: "Here is what a tool call looks like:\\n\\n```xml```\\n\\nThat is the format."."""
import json

import pytest

from tests.unit.tool_deltas import chunk_calls
from tests.unit.tool_routes import sse_events

TOOLS = [{"type": "function", "function": {"name": "Bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]
USER = [{"role": "user", "content": "hi"}]


def _call(command: str) -> str:
    return f"<tool_call>\n<function=Bash>\n<parameter=command>\n{command}\n</parameter>\n</function>\n</tool_call>"


EXAMPLE = "Here is what a tool call looks like:\n\n```xml\n" + _call("ls -la") + "\n```\n\nThat is the format."
# (reply, content, the calls' commands)
CASES = {
    "backticks": (EXAMPLE, EXAMPLE, []),
    "tildes": ("Example:\n~~~\n" + _call("ls") + "\n~~~\ndone", "Example:\n~~~\n" + _call("ls") + "\n~~~\ndone", []),
    "never closed": ("Like this:\n```\n" + _call("ls"), "Like this:\n```\n" + _call("ls"), []),
    "a shorter run closes nothing": ("x\n````\n```\n" + _call("ls") + "\n````\ny", "x\n````\n```\n" + _call("ls")
                                     + "\n````\ny", []),
    "then a real call": (EXAMPLE + "\nNow for real:\n" + _call("pwd"), EXAMPLE + "\nNow for real:", ["pwd"]),
    "after a real call": (_call("pwd") + "\nThe format:\n```\n" + _call("ls") + "\n```",
                          "The format:\n```\n" + _call("ls") + "\n```", ["pwd"]),
    "closed, then a call": ("```\nx\n```\n" + _call("pwd"), "```\nx\n```", ["pwd"]),
    # No fence: inline code, a run indented four spaces (indented code, not a fence), a fence inside a value.
    "inline code": ("run ```echo``` then:\n" + _call("pwd"), "run ```echo``` then:", ["pwd"]),
    "indented four": ("    ```\n" + _call("pwd"), "    ```", ["pwd"]),
    "in a value": (_call("cat <<EOF\n```\nEOF"), None, ["cat <<EOF\n```\nEOF"]),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_fenced_call_is_answer_text(stack, case, stream):
    client, fake = stack
    fake.script.reply, content, commands = CASES[case]
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False, "stream": stream}
    response = await client.post("/v1/chat/completions", json=body)
    if stream:
        chunks = [c for c in sse_events(await response.read()) if c["choices"]]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) or None
        calls, finish = chunk_calls(chunks), chunks[-1]["choices"][0]["finish_reason"]
    else:
        choice = (await response.json())["choices"][0]
        text, calls, finish = choice["message"]["content"], choice["message"].get("tool_calls") or [], \
            choice["finish_reason"]
    assert text == content
    assert [json.loads(c["function"]["arguments"])["command"] for c in calls] == commands
    assert finish == ("tool_calls" if commands else "stop")


async def test_ollama_chat_reads_it_so_too(stack):
    client, fake = stack
    fake.script.reply = EXAMPLE
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "think": False, "stream": False}
    message = (await (await client.post("/api/chat", json=body)).json())["message"]
    assert message["content"] == EXAMPLE and not message.get("tool_calls")


THOUGHT = "The format:\n```xml\n" + _call("ls") + "\n```\nthinking on"
# (reply with thinking on, reasoning, the calls' commands): a call the thinking runs into with no </think> ends it,
# but one it shows in a fenced block is thinking.
THINKING = {
    "never closed": (THOUGHT, THOUGHT, []),
    "then a real call": (THOUGHT + "\n" + _call("pwd"), THOUGHT + "\n", ["pwd"]),
}


@pytest.mark.parametrize("case", THINKING)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_fenced_call_in_the_thinking_is_thinking(stack, case, stream):
    client, fake = stack
    fake.script.reply, reasoning, commands = THINKING[case]
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "stream": stream}
    response = await client.post("/v1/chat/completions", json=body)
    if stream:
        chunks = [c for c in sse_events(await response.read()) if c["choices"]]
        thought = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks)
        calls = chunk_calls(chunks)
    else:
        message = (await response.json())["choices"][0]["message"]
        thought, calls = message["reasoning_content"], message.get("tool_calls") or []
    assert thought.rstrip("\n") == reasoning.rstrip("\n")
    assert [json.loads(c["function"]["arguments"])["command"] for c in calls] == commands


def test_a_long_answer_line_is_not_kept_whole_a_piece():
    """The fences are read line by line as the answer streams; a line longer than any fence line is kept only so far
    (its whole text, copied again for every piece, made a long line's stream quadratic), and reads as no fence."""
    from gateway.tool_fences import Fences
    fences = Fences()
    for _ in range(5000):
        fences.feed("```x")
    assert len(fences._line) <= 257 and fences.opened is None
    fences.feed("\n```\n")
    assert fences.opened == "```"
