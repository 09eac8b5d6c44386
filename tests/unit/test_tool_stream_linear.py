"""A long tool call streamed in small pieces costs time in proportion to its length: each piece escaped its string
value whole again and read the whole call again to see if it was ready, so a 100 KB file written as an argument
took 15 s (XML form) and 8 s (JSON form) of the gateway's event loop, growing with the square of its length. Counted
here as the characters escaped and the whole readings made, in both call forms."""
import json
import random

import pytest

from gateway import tool_filter, tool_preview
from gateway.tool_value_end import ValueScan, value_end
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


class _CountingText(str):
    """A call's text that counts the characters its searches look at (from where each starts to where it stops)."""
    looked = 0

    def find(self, sub, start=0, end=None):
        found = str.find(self, sub, start, end)
        _CountingText.looked += (found + len(sub) if found >= 0 else len(self) if end is None else end) - start
        return found

    def rfind(self, sub, start=0, end=None):
        found = str.rfind(self, sub, start, end)
        _CountingText.looked += (len(self) if end is None else end) - (found if found >= 0 else start)
        return found

    def count(self, sub, start=0, end=None):
        _CountingText.looked += (len(self) if end is None else end) - start
        return str.count(self, sub, start, end)


XML_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": ["string", "null"]}}}}}]
XML_PIECES = ["<parameter=a>\n", "<parameter=b>\n", "<parameter=c>\n", "text ", "12", "\n", "</parameter>",
              "\n</parameter>\n", "</function>", "\n</tool_call>", "<tool_call>", "<parameter=", "</param", '"', "null",
              "<", " x" * 20]


def test_a_long_value_is_searched_and_escaped_at_its_new_text_only():
    # Each piece searched the whole value for its ends (and the whole arguments were built and compared to those
    # sent): a 32k-token parameter cost 62 -> 215 us of gateway CPU a token (bench/long_output.py).
    text = "<tool_call>\n<function=write_file>\n<parameter=content>\n"
    preview = tool_preview.CallPreview(TOOLS, {"write_file"})
    looked = []
    for piece in [CONTENT[i:i + 8] for i in range(0, len(CONTENT), 8)]:
        text += piece
        _CountingText.looked = 0
        preview.grow(_CountingText(text))
        looked.append(_CountingText.looked)
    assert max(looked[-200:]) < 200 < len(text) // 20
    assert preview.prefix == '{"content":"' + json.dumps(CONTENT.rstrip("\n"))[1:-1]


def test_a_long_nullable_value_is_not_read_whole_again_a_piece(monkeypatch):
    # A nullable string (Optional[str]) was read whole for every piece, to see whether it still reads as null.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}}]
    read, real = [], tool_preview._undecided
    monkeypatch.setattr(tool_preview, "_undecided", lambda shown: read.append(len(shown)) or real(shown))
    text, preview = "<tool_call>\n<function=f>\n<parameter=note>\n", tool_preview.CallPreview(tools, {"f"})
    for piece in [CONTENT[i:i + 8] for i in range(0, len(CONTENT), 8)]:
        text += piece
        preview.grow(text)
    assert sum(read) < 100
    assert preview.prefix == '{"note":"' + json.dumps(CONTENT.rstrip("\n"))[1:-1]


class _Rescanning(tool_preview.CallPreview):
    """The preview as it was: every read scans the value being written from its start and escapes it whole, and
    reads a JSON call whole."""

    @property
    def _decided_at(self):
        return -1

    @_decided_at.setter
    def _decided_at(self, at) -> None:
        pass

    @property
    def _json_read(self):
        return None

    @_json_read.setter
    def _json_read(self, at) -> None:
        pass

    @property
    def _scan(self):
        return None

    @_scan.setter
    def _scan(self, scan) -> None:
        pass

    @property
    def _open_at(self):
        return None

    @_open_at.setter
    def _open_at(self, at) -> None:
        pass


JSON_PIECES = ["plain text ", "\\n", '\\"', "\\\\", "\\u00e9", "\\ud83d\\ude00", "\\ud83d", "\\u12", "é😀",
               "\t", '", "b": 12, "c": "', '"}}\n</tool_call>', "\\/"]


def test_a_long_json_argument_is_not_read_whole_again_a_piece(monkeypatch):
    readings, real = [], tool_preview.json_call_prefix
    monkeypatch.setattr(tool_preview, "json_call_prefix", lambda *args: readings.append(1) or real(*args))
    text = '<tool_call>\n{"name": "write_file", "arguments": {"content": "'
    preview = tool_preview.CallPreview(TOOLS, {"write_file"})
    body = json.dumps(CONTENT)[1:-1]
    for start in range(0, len(body), 3):
        text += body[start:start + 3]
        preview.grow(text)
    # A whole reading for each piece that ends inside an escape cut short and the one after it, none for the rest.
    assert len(readings) < len(body) // 30
    assert preview.prefix == '{"content":"' + body


@pytest.mark.parametrize("seed", range(40))
def test_a_call_read_piece_by_piece_previews_as_when_read_whole_each_time(seed):
    rng = random.Random(seed)
    if seed % 2:
        text = '<tool_call>\n{"name": "f", "arguments": {"a": "' + "".join(
            rng.choices(JSON_PIECES, [5] * 6 + [1] * 7, k=120))
    else:
        text = "<tool_call>\n<function=f>\n" + "".join(rng.choice(XML_PIECES) for _ in range(120))
    cuts = sorted(rng.sample(range(1, len(text)), 80)) + [len(text)]
    preview, old, last = tool_preview.CallPreview(XML_TOOLS, {"f"}), _Rescanning(XML_TOOLS, {"f"}), None
    for cut in cuts:
        grown = preview.grow(text[:cut])
        old.grow(text[:cut])
        assert preview.prefix == old.prefix
        if grown is not None:
            assert preview.prefix == last + grown
        last = preview.prefix
    for start in range(1, len(text), 7):
        scan = ValueScan(start)
        for cut in [cut for cut in cuts if cut >= start]:
            assert scan(text[:cut]) == value_end(text[:cut], start)
