"""Text the model writes after a call's function (or JSON object) inside its own block, before </tool_call>, leaves the
call the call on every chat route, streamed or not. The whole reading made such a block text (the markup as content,
finish_reason stop), while a stream had sent the call as it read it and then closed it as the JSON it sent so far:
{} for <function=f><parameter=x>5</parameter></function>\\nDone.\\n</tool_call>, the parameters lost. vLLM's
qwen3_coder parser reads each <function=...</function> of a block and drops the rest of it; Ollama's reads the block's
first function element (xml.Unmarshal in model/parsers/qwen3coder.go): both hand out the call, neither the stray text.
A JSON object the model wrote on after, with no </tool_call> before it ended the output, is the call too, what follows
read as after any call (the next call, answer text)."""
import json

import pytest

from gateway.tools import read_tool_calls
from tests.unit.tool_deltas import first_call_arguments
from tests.unit.tool_routes import USER, every_route

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "integer"}, "s": {"type": "string"}}}}}]
XML = "<tool_call>\n<function=f>\n<parameter=x>\n5\n</parameter>\n<parameter=s>\nab\n</parameter>\n</function>"
JSON = '<tool_call>\n{"name": "f", "arguments": {"s": "ab", "x": 5}}'
SECOND_JSON = '{"name": "f", "arguments": {"x": 6}}'
CALL = {"x": 5, "s": "ab"}
STRING_LAST = "<tool_call>\n<function=f>\n<parameter=s>\nParis\n</parameter>\n</function>"
# output -> (the answer text, the calls' arguments)
OUTPUTS = {
    "xml-words-in-block": (XML + "\nDone, wait.\n</tool_call>", "", [CALL]),
    "json-words-in-block": (JSON + "\nDone, wait.\n</tool_call>", "", [CALL]),
    "json-two-objects-in-block": (JSON + "\n" + SECOND_JSON + "\n</tool_call>", "", [CALL]),
    "json-then-function-in-block": (JSON + "\n<function=f>\n<parameter=x>\n6\n</parameter>\n</function>\n</tool_call>",
                                    "", [CALL, {"x": 6}]),
    "json-then-words-at-eos": (JSON + "\nDone, wait.", "Done, wait.", [CALL]),
    # A string value streams as it comes: its </parameter> must not go out as its text where words follow </function>.
    "string-last-words-in-block": (STRING_LAST + "\n\nDone.\n</tool_call>", "", [{"s": "Paris"}]),
    "string-last-words-at-eos": (STRING_LAST + "\n\nDone.", "Done.", [{"s": "Paris"}]),
}


def _expected(text: str, calls: list, stream: bool) -> dict:
    blocks = calls + ([text] if text else [])
    return {"v1": (text or ("" if stream else None), calls), "ollama": (text, calls), "anthropic": blocks,
            "responses": blocks}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("case", OUTPUTS, ids=OUTPUTS.keys())
async def test_the_call_on_every_route(stack, case, stream):
    client, fake = stack
    fake.script.reply, text, calls = OUTPUTS[case]
    assert await every_route(client, TOOLS, stream) == _expected(text, calls, stream)


@pytest.mark.parametrize("tail", ["\nDone.", "\n" + SECOND_JSON])
def test_an_unclosed_object_followed_by_more_text_waits_for_the_models_end(tail):
    """Before the model ended the output (a stream's partial reading, or max_tokens cut it) a JSON object that more
    text follows without </tool_call> is no call yet: its </tool_call> may still come."""
    assert read_tool_calls(JSON + tail, TOOLS) is None
    assert read_tool_calls(JSON + tail, TOOLS, open_end=True) is not None


def test_markup_between_keeps_the_block_as_it_was():
    """Text that holds a tag of the markup after </function> is no stray text (a value quoting the closing tags
    reads on past them): the reading that takes the whole output still wins."""
    quoted = ("<tool_call>\n<function=f>\n<parameter=s>\na</parameter>\n</function>\nb <parameter=y>\n</parameter>\n"
              "</function>\n</tool_call>")
    read = read_tool_calls(quoted, TOOLS, open_end=True)
    assert read is not None and read[0][0]["function"]["arguments"] == \
        '{"s":"a</parameter>\\n</function>\\nb <parameter=y>"}'


@pytest.mark.parametrize("case", ["string-last-words-in-block", "string-last-words-at-eos", "xml-words-in-block"])
async def test_the_streamed_arguments_are_the_whole_ones(stack, case):
    """The pieces join to exactly the unstreamed arguments: the value's </parameter> went out as its text, then the
    call was closed with the key again ('{"s":"Paris\\n</parameter>","s":"Paris"}'), which a JSON reader that keeps
    the last key hid."""
    client, fake = stack
    fake.script.reply = OUTPUTS[case][0]
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS, "enable_thinking": False}
    whole = await (await client.post("/v1/chat/completions", json=body)).read()
    streamed = await (await client.post("/v1/chat/completions", json={**body, "stream": True})).read()
    assert first_call_arguments(streamed, True) == first_call_arguments(whole, False)
    assert first_call_arguments(whole, False) == json.dumps(OUTPUTS[case][2][0], separators=(",", ":"))
