"""Text the model writes between <function=NAME> and the call's first <parameter= (the opener written twice, a stray
</parameter>, a few words) does not make the call text: vLLM's qwen3_coder reads a call's parameters from its first
structural <parameter= wherever it stands (_parse_xml_function_call via _next_structural_param_start), so these were
calls there and the markup came back as content with finish_reason stop here, streamed or not. The stray text is no
argument and no answer text; a block with no <parameter= at all, or one whose stray text holds another call's tags,
stays as it was."""
import json

import pytest

from gateway.tools import parse_tool_calls, read_tool_calls

TOOLS = [{"type": "function", "function": {"name": "run", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}, "cwd": {"type": "string"}}}}}]
PARAMS = "<parameter=command>\nls\n</parameter>\n<parameter=cwd>\n/tmp\n</parameter>\n</function>\n</tool_call>"
CASES = {
    "opener-twice": "<tool_call>\n<function=run>\n<function=run>\n" + PARAMS,
    "stray-close": "<tool_call>\n<function=run>\n</parameter>\n" + PARAMS,
    "words": "<tool_call>\n<function=run>\nI will list the files.\n" + PARAMS,
}


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("open_end", [False, True], ids=["closed", "eos"])
def test_the_call_reads_past_the_stray_text(text, open_end):
    read = read_tool_calls("Sure.\n" + text + "\nDone.", TOOLS, open_end=open_end)
    assert read is not None and read[1] == "Sure.Done."
    assert [json.loads(call["function"]["arguments"]) for call in read[0]] == [{"command": "ls", "cwd": "/tmp"}]


@pytest.mark.parametrize("text", [
    "<tool_call>\n<function=run>\nls -la\n</function>\n</tool_call>",
    "<tool_call>\n<function=run>\n</function>\n<tool_call>\n<function=run>\n" + PARAMS,
], ids=["no-parameter", "empty-call-then-a-call"])
def test_without_a_parameter_of_its_own_nothing_changes(text):
    calls = parse_tool_calls(text, TOOLS, open_end=True)
    assert calls is None or [json.loads(c["function"]["arguments"]) for c in calls] == [{}, {"command": "ls",
                                                                                             "cwd": "/tmp"}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_chat_gives_the_call(stack, stream):
    client, fake = stack
    fake.script.reply = "Sure.\n" + CASES["opener-twice"]
    body = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
            "enable_thinking": False, "stream": stream}
    raw = (await (await client.post("/v1/chat/completions", json=body)).read()).decode()
    if stream:
        chunks = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
        choices = [choice for chunk in chunks for choice in chunk["choices"]]
        content = "".join(choice["delta"].get("content") or "" for choice in choices)
        arguments = "".join(call["function"].get("arguments") or "" for choice in choices
                            for call in choice["delta"].get("tool_calls") or [])
        finish = [choice["finish_reason"] for choice in choices if choice["finish_reason"]][0]
    else:
        choice = json.loads(raw)["choices"][0]
        content, finish = choice["message"]["content"], choice["finish_reason"]
        arguments = choice["message"]["tool_calls"][0]["function"]["arguments"]
    assert (content, json.loads(arguments), finish) == ("Sure.", {"command": "ls", "cwd": "/tmp"}, "tool_calls")
