"""A long tool call streamed in small pieces costs time in proportion to its length: each piece escaped its string
value whole again and read the whole call again to see if it was ready, so a 100 KB file written as an argument
took 15 s (XML form) and 8 s (JSON form) of the gateway's event loop, growing with the square of its length. Counted
here as the characters escaped and the whole readings made, in both call forms."""
import json

import pytest

from gateway import tool_filter, tool_preview
from gateway.tool_stream import ToolCallStream

TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]
CONTENT = 'line "of" code\twith text\n' * 400
FORMS = {
    "xml": ("<tool_call>\n<function=write_file>\n<parameter=path>\n/a\n</parameter>\n<parameter=content>\n" + CONTENT
            + "\n</parameter>\n</function>\n</tool_call>"),
    "json": '<tool_call>\n{"name": "write_file", "arguments": ' + json.dumps({"path": "/a", "content": CONTENT})
            + "}\n</tool_call>",
}


@pytest.mark.parametrize("form", FORMS)
def test_each_character_is_escaped_once_and_the_call_read_whole_rarely(form, monkeypatch):
    escaped, readings = [], []
    real_escape, real_ready = tool_preview._escaped, tool_filter.ready_call
    monkeypatch.setattr(tool_preview, "_escaped", lambda text: escaped.append(len(text)) or real_escape(text))
    monkeypatch.setattr(tool_filter, "ready_call", lambda *args: readings.append(1) or real_ready(*args))
    text, stream, sent = FORMS[form], ToolCallStream(TOOLS), ""
    for start in range(0, len(text), 4):
        sent += "".join(delta.arguments for delta in stream.push(text[start:start + 4])[1])
    sent += "".join(delta.arguments for delta in stream.finish("stop")[1])
    assert json.loads(sent) == {"path": "/a", "content": CONTENT}
    assert len(CONTENT) <= sum(escaped) <= len(CONTENT) + 100
    assert len(readings) <= 3
