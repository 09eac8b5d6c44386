"""A Hermes JSON tool call written slightly wrong is the call on every chat route, streamed or not, where the whole
reading made it text (the markup as content, no call) while a stream sent the call as it read it: the object's last
closing braces left out before </tool_call> or at the end the model's end token made (hermes-agent#5315:
qwen3.5-122b writes {"name": "terminal", "arguments": {"command": "ls -la"}</tool_call>), one brace too many, a
trailing comma, and line breaks or tabs raw inside a string (a file's text). An object the end token cut inside a
value is the call as far as it was written, as the XML form's value runs to the output's end, and a </tool_call> it
cut is markup."""
import pytest

from gateway.tools import read_tool_calls
from tests.unit.tool_routes import every_route

TOOLS = [{"type": "function", "function": {"name": "terminal", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}}}}}]
OUTPUTS = {
    "outer-brace-left-out": ('<tool_call>\n{"name": "terminal", "arguments": {"command": "ls -la"}\n</tool_call>',
                             {"command": "ls -la"}),
    "no-space-before-close": ('<tool_call>{"name": "terminal", "arguments": {"command": "ls"}</tool_call>',
                              {"command": "ls"}),
    "both-braces-at-eos": ('<tool_call>\n{"name": "terminal", "arguments": {"command": "ls", "timeout": 30',
                           {"command": "ls", "timeout": 30}),
    "brace-too-many": ('<tool_call>\n{"name": "terminal", "arguments": {"command": "ls"}}}\n</tool_call>',
                       {"command": "ls"}),
    "cut-in-a-string": ('<tool_call>\n{"name": "terminal", "arguments": {"command": "ls -l', {"command": "ls -l"}),
    "cut-closer": ('<tool_call>\n{"name": "terminal", "arguments": {"command": "ls"}}\n</tool_c', {"command": "ls"}),
    "trailing-commas": ('<tool_call>\n{"name": "terminal", "arguments": {"command": "echo ,}", "timeout": 5,},}\n'
                        '</tool_call>', {"command": "echo ,}", "timeout": 5}),
    "raw-line-breaks": ('<tool_call>\n{"name": "terminal", "arguments": {"command": "printf \'a\nb\'\t|wc"}}\n'
                        '</tool_call>', {"command": "printf 'a\nb'\t|wc"}),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("case", OUTPUTS, ids=OUTPUTS.keys())
async def test_the_call_on_every_route(stack, case, stream):
    client, fake = stack
    fake.script.reply, arguments = OUTPUTS[case]
    assert await every_route(client, TOOLS, stream) == {
        "v1": (None if not stream else "", [arguments]), "ollama": ("", [arguments]),
        "anthropic": [arguments], "responses": [arguments]}


def test_a_stop_string_or_max_tokens_leaves_a_cut_object_text():
    """Only the model's end token ends an object it left open; a stop string or max_tokens cut it (no call)."""
    text = OUTPUTS["both-braces-at-eos"][0]
    assert read_tool_calls(text, TOOLS, open_end=True) is None and read_tool_calls(text, TOOLS) is None


@pytest.mark.parametrize("text", ['<tool_call>\n{"name": "term', '<tool_call>\n{"name": "terminal", "argu'])
def test_a_name_the_arguments_do_not_follow_is_no_call(text):
    """As a stream begins a JSON call only once a key after its whole name has begun."""
    assert read_tool_calls(text, TOOLS, open_end=True, eos=True) is None


def test_no_constant_json_refuses():
    """NaN, Infinity are no JSON (load_json's reading), also where the object is healed."""
    text = '<tool_call>\n{"name": "terminal", "arguments": {"timeout": NaN}\n</tool_call>'
    assert read_tool_calls(text, TOOLS, open_end=True, eos=True) is None
