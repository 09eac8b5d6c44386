"""A bare <function=NAME>...</function> block of an offered tool is a call, as vLLM's qwen3_coder parser reads it.

Qwen3-Coder and Qwen3.6 at times drop the opening <tool_call> (often keeping an orphan </tool_call>): the call came
back as plain content, finish_reason "stop", and the client never ran it (ollama/ollama#16686, #17353, #18530). A
bare block counts only when NAME is an offered tool and the call reads whole; prose that shows the syntax stays text.
"""
import json

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.tool_filter import ToolCallFilter
from gateway.tools import parse_tool_calls

TOOLS = [{"type": "function", "function": {"name": "Glob", "parameters": {
    "type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}}]
BARE = "<function=Glob>\n<parameter=pattern>\n*.md\n</parameter>\n</function>"


def _patterns(calls) -> list:
    return [json.loads(c["function"]["arguments"])["pattern"] for c in calls]


@pytest.mark.parametrize("text,open_end", [(BARE + "\n</tool_call>", False), (BARE, True),
                                           (BARE + "\n" + BARE.replace("md", "py"), True)],
                         ids=["orphan-close", "eos", "two"])
def test_a_bare_call_of_an_offered_tool_is_read(text, open_end):
    patterns = _patterns(parse_tool_calls(text, TOOLS, open_end=open_end))
    assert patterns == (["*.md", "*.py"] if text.count("<function=") == 2 else ["*.md"])


@pytest.mark.parametrize("text", [BARE.replace("Glob", "Grep") + "\n</tool_call>", "Write <function=Glob> first.",
                                  BARE + "\nand more prose"])
def test_a_bare_block_that_is_no_whole_call_of_an_offered_tool_stays_text(text):
    assert parse_tool_calls(text, TOOLS, open_end=True) is None


def test_prose_showing_the_syntax_after_the_calls_is_not_a_call():
    text = f"<tool_call>\n{BARE}\n</tool_call>\nThe syntax is <function=name>."
    assert _patterns(parse_tool_calls(text, TOOLS, open_end=True)) == ["*.md"]


def test_the_stream_holds_a_split_bare_opener_back():
    flt = ToolCallFilter(TOOLS)
    shown = flt.push("I will look.\n\n<func") + flt.push(BARE[5:] + "\n</tool_call>")
    tail, calls = flt.finish("stop")
    assert (shown, tail, _patterns(calls)) == ("I will look.", "", ["*.md"])


@pytest.mark.parametrize("stream", [False, True])
async def test_the_chat_answer_has_the_call_not_the_markup(stream):
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    fake.script.reply = "I will look.\n\n" + BARE + "\n</tool_call>"
    body = {"messages": [{"role": "user", "content": "List the md files"}], "tools": TOOLS, "enable_thinking": False,
            "stream": stream}
    async with fake_gateway(fake) as (client, _):
        raw = (await (await client.post("/v1/chat/completions", json=body)).read()).decode()
    if stream:
        chunks = [orjson.loads(line[6:]) for line in raw.split("\n\n") if line.startswith("data: {")]
        deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
        content = "".join(d.get("content") or "" for d in deltas)
        calls = [call for d in deltas for call in d.get("tool_calls") or []]
        finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1]
    else:
        choice = orjson.loads(raw)["choices"][0]
        content, calls, finish = choice["message"]["content"], choice["message"]["tool_calls"], choice["finish_reason"]
    assert (content, _patterns(calls), finish) == ("I will look.", ["*.md"], "tool_calls")
