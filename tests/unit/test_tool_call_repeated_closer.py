"""A </tool_call> (or </function>) the model writes twice after a call is markup between calls, streamed or not, as
the text after the last call already read it (gateway.tools._without_stray_closers) and vLLM's qwen3_coder parser
reads each <tool_call> block by its own tags. Before, with a second </tool_call> before the next call, the whole
reading took the first call's value to run over its closers into the next call ({"n": "1\\n</parameter>\\n
</function>\\n</tool_call>\\n</tool_call>\\n<tool_call>..."}, one call for two) and, where a later block was
malformed, read every call as answer text, while the stream held the call to the output's end and sent it with
arguments "{}" and no text: stream and whole differed."""
import json

import orjson
import pytest

from tests.unit.tool_deltas import chunk_calls

TOOLS = [{"type": "function", "function": {"name": "Bash", "parameters": {
    "type": "object", "properties": {"n": {"type": "integer"}}}}}]
USER = [{"role": "user", "content": "hi"}]


def _call(n: int) -> str:
    return f"<tool_call>\n<function=Bash>\n<parameter=n>\n{n}\n</parameter>\n</function>\n</tool_call>"


# (reply, answer text, the calls' arguments)
CASES = {
    "two calls": (_call(1) + "\n</tool_call>\n" + _call(2), None, [{"n": 1}, {"n": 2}]),
    "function closer too": (_call(1) + "</function></tool_call>" + _call(2), None, [{"n": 1}, {"n": 2}]),
    "then a malformed block": (_call(1) + "</tool_call><tool_call><function=Bash><parameter=</parameter> text",
                               "<tool_call><function=Bash><parameter=</parameter> text", [{"n": 1}]),
}


async def _answer(client, stream: bool):
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False, "stream": stream}
    response = await client.post("/v1/chat/completions", json=body)
    if not stream:
        message = (await response.json())["choices"][0]["message"]
        return message["content"], [json.loads(c["function"]["arguments"]) for c in message.get("tool_calls") or []]
    chunks = [orjson.loads(line[6:]) for line in (await response.read()).decode().split("\n")
              if line.startswith("data: {")]
    chunks = [chunk for chunk in chunks if chunk["choices"]]
    text = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks) or None
    return text, [json.loads(call["function"]["arguments"]) for call in chunk_calls(chunks)]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_repeated_closer_is_markup_between_calls(stack, case, stream):
    client, fake = stack
    fake.script.reply, content, arguments = CASES[case]
    assert await _answer(client, stream) == (content, arguments)
