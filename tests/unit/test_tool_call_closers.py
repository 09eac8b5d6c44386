"""A tool call whose closing tags the model left out, read as vLLM's qwen3_coder parser reads it.

`...</parameter>\\n</function>` and then the end of the output (no </tool_call>), `...</parameter>\\n</tool_call>`
(no </function>) and a Hermes JSON call without its </tool_call> came back as plain content with finish_reason
"stop": the client saw the markup as text and no call (the class of ollama/ollama#17353 and #18530, calls that leak
into content when the model drops a tag). Where the model ended the output itself (eos, a stop string), such a call is
read; cut by max_tokens it is the cut call a stream of it sends (its arguments as far as they were read, no closing
brace), with finish_reason "length", streamed or not (test_cut_stream_whole), so a client sees it was cut."""
import json

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.tools import parse_tool_calls, read_tool_calls

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": PARAMS}}]
BODY = "<tool_call>\n<function=weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n"
DROPPED = {
    "no-tool-call-close": BODY + "</function>",
    "no-tool-call-close-newline": BODY + "</function>\n",
    "no-function-close": BODY + "</tool_call>",
    "no-closers": BODY,
    "hermes-no-close": '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris", "days": 2}}',
}
ARGUMENTS = {"city": "Paris", "days": 2}


@pytest.mark.parametrize("text", DROPPED.values(), ids=DROPPED.keys())
def test_a_call_the_model_ended_without_its_closers_is_read(text):
    calls = parse_tool_calls(text, TOOLS, open_end=True)
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("weather", ARGUMENTS)]


def test_a_first_call_without_closers_before_the_next_call_is_read():
    text = BODY + "</function>\n" + BODY.replace("Paris", "Rome") + "</function>\n</tool_call>"
    calls = parse_tool_calls(text, TOOLS)
    assert [json.loads(c["function"]["arguments"])["city"] for c in calls] == ["Paris", "Rome"]


@pytest.mark.parametrize("text", [BODY + "</function>", BODY, DROPPED["hermes-no-close"]])
def test_a_call_cut_short_is_not_read(text):
    assert parse_tool_calls(text, TOOLS) is None


def test_prose_after_an_unclosed_call_is_answer_text():
    """The call ends at its </function>, as vLLM's _scan_to_structural_function_end reads it; the prose is text
    (tests/unit/test_tool_call_text_between.py: a stream sent the value with its '</parameter>' before)."""
    calls, text = read_tool_calls(BODY + "</function>\nThat is all.", TOOLS, open_end=True)
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [ARGUMENTS] and text == "That is all."


@pytest.mark.parametrize("max_tokens,finish", [(None, "tool_calls"), (40, "length")])
async def test_the_chat_answer_reads_it_only_when_the_model_ended(max_tokens, finish):
    tokenizer = build_tokenizer()
    fake = FakeServing(tokenizer, max_context_len=4096)
    fake.script.reply = "Checking." + DROPPED["no-tool-call-close"]
    if max_tokens is not None:
        max_tokens = len(tokenizer.encode(fake.script.reply).ids)   # the whole text, then cut: length
    body = {"messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS, "enable_thinking": False,
            "max_tokens": max_tokens}
    async with fake_gateway(fake) as (client, _):
        answer = orjson.loads(await (await client.post("/v1/chat/completions", json=body)).read())
    choice = answer["choices"][0]
    assert choice["finish_reason"] == finish
    if finish == "length":
        arguments = [c["function"]["arguments"] for c in choice["message"]["tool_calls"]]
        assert choice["message"]["content"] == "Checking." and len(arguments) == 1
        assert json.dumps(ARGUMENTS, separators=(",", ":")).startswith(arguments[0]) and arguments[0][-1] != "}"
    else:
        assert choice["message"]["content"] == "Checking."
        assert [json.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]] == [ARGUMENTS]


async def test_ollama_reads_it_too():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    fake.script.reply = DROPPED["no-function-close"]
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS,
            "stream": False, "think": False}
    async with fake_gateway(fake) as (client, _):
        answer = orjson.loads(await (await client.post("/api/chat", json=body)).read())
    assert [c["function"]["arguments"] for c in answer["message"]["tool_calls"]] == [ARGUMENTS]
    assert answer["message"]["content"] == ""
