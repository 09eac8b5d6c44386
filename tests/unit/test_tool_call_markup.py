"""Unit tests: tool-call arguments that hold the call markup itself (</tool_call>, </parameter>, a whole
<parameter=x>...</parameter> pair) and the Python literals Qwen models write (True, None, {'k': 'v'}) come back
exact, parsed or streamed, on /v1, Ollama and Anthropic (ninfer#138, Rapid-MLX#1515, vLLM qwen3_coder)."""
import json

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.tools import parse_tool_calls
from tests.unit.tool_deltas import chunk_calls

BASH = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {
    "command": {"type": "string"}, "verbose": {"type": "boolean"}, "env": {"type": "object"},
    "timeout": {"type": ["integer", "null"]}}}}}
# ninfer#138 (Qwen3.8 27B): a command that prints the markup.
NESTED = "python3 - <<'PY'\nimport re\npattern = r'<parameter=edits>\\n(.*?)\\n</parameter>'\nprint(pattern)\nPY"
VALUES = {"nested-pair": NESTED,
          "call-close": "A tool call block ends with </tool_call> on its own.",
          "param-close": "A parameter block ends with </parameter> here.",
          "function-close": "echo '</function>'",
          "whole-call": "<tool_call>\n<function=x>\n<parameter=y>\n1\n</parameter>\n</function>\n</tool_call>"}


def call_text(command: str, extra: str = "") -> str:
    return (f"<tool_call>\n<function=bash>\n<parameter=command>\n{command}\n</parameter>\n{extra}</function>\n"
            f"</tool_call>")


def arguments(text: str) -> list:
    calls = parse_tool_calls(text, [BASH])
    return [json.loads(call["function"]["arguments"]) for call in calls] if calls else calls


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
def test_value_holding_the_markup_is_kept_whole(value):
    verbose = "<parameter=verbose>\ntrue\n</parameter>\n"
    assert arguments(call_text(value)) == [{"command": value}]
    assert arguments(call_text(value, verbose)) == [{"command": value, "verbose": True}]
    assert arguments(call_text(value) + "\n" + call_text("ls")) == [{"command": value}, {"command": "ls"}]


def test_parameter_the_schema_does_not_declare_is_still_read():
    assert arguments(call_text("ls", "<parameter=cwd>\n/tmp\n</parameter>\n")) == [{"command": "ls", "cwd": "/tmp"}]


def test_json_form_with_the_close_tag_in_a_string():
    text = '<tool_call>\n{"name": "bash", "arguments": {"command": "echo </tool_call>"}}\n</tool_call>'
    assert arguments(text) == [{"command": "echo </tool_call>"}]


@pytest.mark.parametrize("text", [call_text("ls").removesuffix("</tool_call>"), "<tool_call>\n<function=bash>\n",
                                  call_text("ls").replace("</parameter>\n</function>\n</tool_call>", "")],
                         ids=["no-close", "cut", "no-end"])
def test_unclosed_call_is_not_a_call(text):
    assert arguments(text) is None


def test_python_literals_are_typed_by_the_schema():
    extra = ("<parameter=verbose>\nTrue\n</parameter>\n<parameter=env>\n{'HOME': '/root', 'DEBUG': False}\n"
             "</parameter>\n<parameter=timeout>\nNone\n</parameter>\n")
    assert arguments(call_text("None", extra)) == [
        {"command": "None", "verbose": True, "env": {"HOME": "/root", "DEBUG": False}, "timeout": None}]


def test_values_that_are_no_literal_stay_text():
    # A boolean word other than true / false is false, as vLLM and Ollama read it (test_tool_single_types).
    extra = "<parameter=verbose>\nyes\n</parameter>\n<parameter=env>\n__import__('os')\n</parameter>\n"
    assert arguments(call_text("ls", extra)) == [{"command": "ls", "verbose": False, "env": "__import__('os')"}]


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    fake.script.reply = "Run it.</think>\n\n" + call_text(NESTED, "<parameter=verbose>\nTrue\n</parameter>\n")
    async with fake_gateway(fake) as pair:
        yield pair


EXPECTED = {"command": NESTED, "verbose": True}
USER = [{"role": "user", "content": "go"}]


async def test_openai_call_arguments_are_exact_streamed_or_not(stack):
    client, _ = stack
    body = {"model": "fake-model", "messages": USER, "tools": [BASH]}
    whole = await (await client.post("/v1/chat/completions", json=body)).json()
    choice = whole["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == EXPECTED
    streamed = await (await client.post("/v1/chat/completions", json={**body, "stream": True})).text()
    calls = chunk_calls([json.loads(line[6:]) for line in streamed.splitlines() if line.startswith("data: {")])
    assert [json.loads(call["function"]["arguments"]) for call in calls] == [EXPECTED]


async def test_ollama_and_anthropic_call_arguments_are_exact(stack):
    client, _ = stack
    ollama = await (await client.post("/api/chat", json={"model": "fake-model", "stream": False, "messages": USER,
                                                         "tools": [BASH]})).json()
    assert [call["function"]["arguments"] for call in ollama["message"]["tool_calls"]] == [EXPECTED]
    anthropic = await (await client.post("/v1/messages", json={
        "model": "fake-model", "max_tokens": 400, "messages": USER,
        "tools": [{"name": "bash", "input_schema": BASH["function"]["parameters"]}]})).json()
    assert [block["input"] for block in anthropic["content"] if block["type"] == "tool_use"] == [EXPECTED]
    assert anthropic["stop_reason"] == "tool_use"
