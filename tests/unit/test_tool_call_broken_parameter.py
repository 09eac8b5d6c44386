"""A <parameter= element the model wrote slightly wrong (its name missing: `<parameter=` then a line break; its '>'
missing: `<parameter=ids: [1, 2]`; a stray '=' and no value: `<parameter=note=`) is dropped, and the value before it
ends at its </parameter>, streamed or not. vLLM's Qwen3 parser (qwen3_coder / qwen3_xml, vllm/parser/qwen3.py
_PARAM_RE) reads a value to its first </parameter> and a broken element matches no <parameter=NAME>, so its
answer is {"cmd": "timeout 7"} (vllm-project/vllm#55495, the outputs Codex sessions met). Here the value ran on
through the broken element, which became text of the command: {"cmd": "timeout 7\\n</parameter>\\n<parameter=..."}."""
import json

import pytest

from tests.unit.tool_deltas import chunk_calls
from tests.unit.tool_routes import sse_events

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "cmd": {"type": "string"}, "note": {"type": "string"}, "ids": {"type": "array"}}}}}]
USER = [{"role": "user", "content": "hi"}]


def _call(*elements: str) -> str:
    return "<tool_call>\n<function=f>\n" + "".join(elements) + "</function>\n</tool_call>"


CMD = "<parameter=cmd>\ntimeout 7\n</parameter>\n"
NOTE = "<parameter=note>\nok\n</parameter>\n"
CASES = {
    "name missing": (_call(CMD, "<parameter=\necho X\n</parameter>\n"), {"cmd": "timeout 7"}),
    "'>' missing": (_call(CMD, "<parameter=ids: [1, 2]\n</parameter>\n"), {"cmd": "timeout 7"}),
    "stray '='": (_call(CMD, "<parameter=note=\n</parameter>\n"), {"cmd": "timeout 7"}),
    "empty name": (_call(CMD, "<parameter=>\nx\n</parameter>\n", NOTE), {"cmd": "timeout 7", "note": "ok"}),
    "between two": (_call(CMD, "<parameter=\necho X\n</parameter>\n", NOTE), {"cmd": "timeout 7", "note": "ok"}),
    "first": (_call("<parameter=\necho X\n</parameter>\n", CMD), {"cmd": "timeout 7"}),
    # One with no </parameter> of its own ends at the call's closing tag, or at the output's end (the eos ended it).
    "unclosed": (_call(CMD, "<parameter=\necho X\n"), {"cmd": "timeout 7"}),
    "at the end": ("<tool_call>\n<function=f>\n" + CMD + "<parameter=\necho", {"cmd": "timeout 7"}),
    # As vLLM's Qwen3 parser's parameter pattern, a broken element ends before the next <parameter= too, and one whose
    # only '>' is its </parameter>'s is broken (qwen3coder_tool_parser.py tool_call_parameter_regex, a block without a
    # '>' skipped): the parameter after it is read, and no key holds markup.
    "unclosed, then one": (_call(CMD, "<parameter=\necho X\n", NOTE), {"cmd": "timeout 7", "note": "ok"}),
    "'>' missing on its line": (_call(CMD, "<parameter=ids: [1, 2]</parameter>\n", NOTE),
                                {"cmd": "timeout 7", "note": "ok"}),
    # Markup quoted inside a value stays the value's (the next element is well formed).
    "quoted markup": (_call("<parameter=cmd>\nprintf '</parameter>\\n' > x\n</parameter>\n", NOTE),
                      {"cmd": "printf '</parameter>\\n' > x", "note": "ok"}),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_broken_parameter_element_is_dropped(stack, case, stream):
    client, fake = stack
    fake.script.reply, expected = CASES[case]
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False, "stream": stream}
    response = await client.post("/v1/chat/completions", json=body)
    if stream:
        chunks = [c for c in sse_events(await response.read()) if c["choices"]]
        calls = chunk_calls(chunks)
        finish = chunks[-1]["choices"][0]["finish_reason"]
    else:
        choice = (await response.json())["choices"][0]
        calls, finish = choice["message"]["tool_calls"], choice["finish_reason"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [("f", expected)]
    assert finish == "tool_calls"
