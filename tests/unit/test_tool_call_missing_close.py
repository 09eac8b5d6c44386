"""A tool call whose </parameter> the model left out is still the call, read as vLLM's qwen3_coder parser reads it
(vllm/tool_parsers/qwen3coder_tool_parser.py, _find_true_param_end's fallbacks): the value ends at the tool's next
parameter on a line of its own, or at the call's closing tags. It was text with no call (ollama/ollama#18563,
#17276: 'element <parameter> closed by </function>'), or the next parameter was read into the value. Parsed, and on
/v1 (whole and streamed), /api/chat and /v1/messages over the fake scheduler."""
import json

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.tools import parse_tool_calls
from tests.unit.tool_deltas import chunk_calls

WRITE = {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object", "properties": {
    "path": {"type": "string"}, "content": {"type": "string"}, "mode": {"type": "integer"}}}}}
CODE = "def f():\n    return 1\n"


def call(*params: tuple) -> str:
    body = "".join(f"<parameter={name}>\n{value}\n{close}" for name, value, close in params)
    return f"<tool_call>\n<function=write_file>\n{body}</function>\n</tool_call>"


CASES = {
    # The last value runs into </function>.
    "before-function-close": (call(("path", "a.py", "</parameter>\n"), ("content", CODE, "")),
                              {"path": "a.py", "content": CODE}),
    # A value runs into the tool's next parameter.
    "before-next-parameter": (call(("path", "a.py", ""), ("content", CODE, "</parameter>\n"), ("mode", "644", "")),
                              {"path": "a.py", "content": CODE, "mode": 644}),
}


def arguments(text: str) -> list:
    calls = parse_tool_calls(text, [WRITE], open_end=True)
    return [json.loads(c["function"]["arguments"]) for c in calls] if calls else calls


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_missing_parameter_close_still_reads_the_call(case):
    text, expected = case
    assert arguments(text) == [expected]
    assert arguments(text + "\n" + call(("path", "b.py", "</parameter>\n"))) == [expected, {"path": "b.py"}]


def test_a_value_holding_a_whole_parameter_pair_stays_whole():
    value = "see:\n<parameter=mode>\n7\n</parameter>\nend"
    assert arguments(call(("content", value, "</parameter>\n"))) == [{"content": value}]


def test_a_parameter_line_the_tool_does_not_declare_stays_in_the_value():
    assert arguments(call(("content", "x\n<parameter=other>\ny", ""))) == [{"content": "x\n<parameter=other>\ny"}]


def test_a_value_a_stop_string_cut_is_no_call():
    assert arguments("<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n") is None


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    async with fake_gateway(fake) as pair:
        yield pair


def _sse_calls(raw: bytes) -> list:
    chunks = [orjson.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]
    return [c["function"]["arguments"] for c in chunk_calls(chunks)]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_every_route_answers_the_call(stack, case):
    client, fake = stack
    text, expected = case
    fake.script.reply = "Writing it.\n\n" + text
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "tools": [WRITE],
            "enable_thinking": False}
    choice = (await (await client.post("/v1/chat/completions", json=body)).json())["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "Writing it."
    assert [json.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]] == [expected]
    streamed = await (await client.post("/v1/chat/completions", json={**body, "stream": True})).read()
    assert [json.loads(a) for a in _sse_calls(streamed)] == [expected]
    ollama = orjson.loads(await (await client.post("/api/chat", json={
        **body, "think": False, "stream": False})).read())
    assert [c["function"]["arguments"] for c in ollama["message"]["tool_calls"]] == [expected]
    anthropic = await (await client.post("/v1/messages", json={
        "model": "fake-model", "max_tokens": 500, "messages": body["messages"], "thinking": {"type": "disabled"},
        "tools": [{"name": "write_file", "input_schema": WRITE["function"]["parameters"]}]})).json()
    assert [b["input"] for b in anthropic["content"] if b["type"] == "tool_use"] == [expected]
