"""Gateway process: the arguments of the one <tool_call> being written, as far as the text so far makes them certain
(tool_stream streams them): a parameter's fragment once its value certainly ends, a plain string parameter's text
as it comes, escaped, up to anything that might end it (a nullable one's once it cannot read as null). The ends are
those tool_markup's whole reading takes."""
from __future__ import annotations

import json
from typing import Optional

from gateway.tool_markup import CALL_OPEN, FUNCTION_OPEN, PARAM_OPEN, broken_param_end, skip_space
from gateway.tool_preview_json import escape_begins, json_call_prefix, string_piece
from gateway.text_parts import TextParts
from gateway.tool_value_end import ValueScan, follows_value, partial_tag
from gateway.tool_values import ToolParams, untyped
from gateway.tools import dump_arguments

# Keywords a string parameter's schema may carry and still take any text as written (no enum, pattern, bounds, null
# or format that would make its value depend on the whole text).
_PLAIN_STRING_KEYS = {"type", "description", "title", "default", "examples", "$comment", "deprecated", "readOnly",
                      "writeOnly"}
def _text_kind(params: ToolParams, name: str) -> Optional[bool]:
    """False where the parameter's value is its text as written whatever it holds: a string schema with no other
    constraint, a schema with no type, or no schema (a parameter the tool does not declare); True where it is that
    text unless the text reads as null or a JSON string: a plain nullable string (["string", "null"], pydantic's
    Optional[str]: anyOf string / null), as tool_values reads one; None otherwise."""
    schema = params.props.get(name, params.others)
    if schema is None or untyped(schema) or (schema.get("type") in ("string", ["string"])
                                             and set(schema) <= _PLAIN_STRING_KEYS):
        return False
    kinds = schema.get("type")
    if isinstance(kinds, list) and sorted(map(str, kinds)) == ["null", "string"]:
        return True if set(schema) <= _PLAIN_STRING_KEYS else None
    branches = [schema.get(key) for key in ("anyOf", "oneOf") if key in schema]
    plain = (len(branches) == 1 and isinstance(branches[0], list) and "type" not in schema
             and len(set(schema) - _PLAIN_STRING_KEYS) == 1)
    if not plain or not all(isinstance(b, dict) and set(b) <= _PLAIN_STRING_KEYS for b in branches[0]):
        return None
    return True if sorted(str(b.get("type")) for b in branches[0]) == ["null", "string"] else None


def _undecided(shown: str) -> bool:
    """Whether a nullable string's text so far may still read as null (None, null) or as a JSON string ("x"), which
    tool_values takes before the text."""
    head = shown.strip().lower()
    return head.startswith('"') or "null".startswith(head) or "none".startswith(head)


def _escaped(text: str) -> str:
    """text inside a JSON string as dump_arguments writes it (each character escaped on its own, so pieces join)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


class _GrowingEscape:
    """_escaped of a string value being written, which grows at its end from one piece to the next: only the new
    characters are escaped (escaping the whole value again for every piece made a long value's stream quadratic:
    15 s of gateway time for a 100 KB file)."""

    def __init__(self):
        self._raw, self._pieces = TextParts(), []

    @property
    def text(self) -> str:
        """The value's text so far, escaped."""
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    def grow(self, text: str) -> Optional[str]:
        """Takes the value's text so far; returns its new text escaped where it grew at its end (else None: it is
        escaped anew)."""
        raw = str(self._raw)
        grew = text.startswith(raw)
        added = _escaped(text[len(raw):] if grew else text)
        if grew:
            self._pieces.append(added)
        else:
            self._pieces = [added]
        self._raw = TextParts(text)
        return added if grew else None

    def extend(self, text: str) -> str:
        """Takes the text the value grew by; returns it escaped."""
        self._raw.add(text)
        self._pieces.append(_escaped(text))
        return self._pieces[-1]


class CallPreview:
    """The arguments of one <tool_call> being written, as far as they are certain: `prefix` after grow(text) with the
    call's text so far (from its <tool_call>), None until the call's name may go out. grow says what they grew by."""

    def __init__(self, tools: list[dict], names: frozenset):
        self._tools, self._names = tools, names
        self.name: Optional[str] = None
        self._params = ToolParams()
        self._pos = -1               # where the next parameter or the call's end is read; -1 before the name
        self.pairs: list[str] = []   # the parameters read, each '"key":value' as dump_arguments writes it
        self._keys: set = set()
        # The string parameter being written, '"key":"text so far', in pieces (`open` joins them), and where an XML
        # value's text shown in it is: (key, start, end) of the call's text.
        self._open: list[str] = []
        self._open_len = 0
        self._open_at: Optional[tuple] = None
        self._grown: Optional[str] = ""   # grow's answer: what prefix grew by at its end; None: it changed otherwise
        self.closed = False
        self._begun = False          # a parameter or the call's end was read: its name may go out
        self._held = False           # it reads no further (another form, an unknown name, a parameter given twice)
        self._json_at: Optional[int] = None   # where a JSON (Hermes) call's object begins
        # Where its text is read to, when that is inside its last argument, a string that the text after it continues.
        self._json_read: Optional[int] = None
        self._escape = _GrowingEscape()       # a JSON call's open string argument, escaped
        self._scan: Optional[ValueScan] = None   # the XML value being written
        self._decided_at = -1        # where a nullable string value starts that reads as text whatever follows

    @property
    def prefix(self) -> Optional[str]:
        """The arguments JSON certain so far (open at its end unless closed); None until the name may go out."""
        if not self._begun:
            return None
        return "{" + ",".join(self.pairs + ([self.open] if self.open else [])) + ("}" if self.closed else "")

    @property
    def begun(self) -> bool:
        """Whether the call's name may go out (prefix is not None)."""
        return self._begun

    @property
    def open(self) -> str:
        """The last argument's text still being written ("" when none)."""
        if len(self._open) > 1:
            self._open = ["".join(self._open)]
        return self._open[0] if self._open else ""

    @open.setter
    def open(self, value: str) -> None:
        if len(value) != self._open_len or value != self.open:
            self._grown = None
        self._open, self._open_len, self._open_at = [value] if value else [], len(value), None

    def grow(self, text: str) -> Optional[str]:
        """Reads text, the call's text so far (the last grow's, grown at its end); returns what prefix grew by at its
        end since the last grow ("" when it did not change), None where it changed otherwise or is None. A stream
        sends that piece without building prefix (it and the arguments sent, built and compared again for every
        token, made a long call's stream quadratic)."""
        self._grown = ""
        begun = self._begun
        if self._pos < 0 and not self._held and self._json_at is None:
            self._read_name(text)
        if self._json_at is not None:
            self._read_json(text)
        while self._json_at is None and self._pos >= 0 and not (self.closed or self._held) and self._step(text):
            pass
        return self._grown if begun and self._begun else None

    def _read_name(self, text: str) -> None:
        if not text.startswith(CALL_OPEN):
            self._held = True
            return
        pos = skip_space(text, len(CALL_OPEN))
        while text.startswith(CALL_OPEN, pos):
            pos = skip_space(text, pos + len(CALL_OPEN))
        if pos == len(text) or partial_tag(text, pos, (FUNCTION_OPEN, CALL_OPEN)):
            return
        if text.startswith("{", pos):
            self._json_at = pos
            return
        close = text.find(">", pos) if text.startswith(FUNCTION_OPEN, pos) else -1
        if close < 0:
            self._held = not text.startswith(FUNCTION_OPEN, pos)
            return
        name = text[pos + len(FUNCTION_OPEN):close].strip()
        if name not in self._names:
            self._held = True
            return
        self.name, self._params, self._pos = name, ToolParams.of(self._tools, name), close + 1

    def _read_json(self, text: str) -> None:
        """A JSON call's arguments as far as they are certain (Qwen3-Next and Qwen3 write their calls so). While its
        last argument is a string being written, the text added is read alone (string_piece) where it can be: reading
        the whole call again for every piece made a long argument's stream quadratic."""
        if self._json_read is not None:
            piece = string_piece(text[self._json_read:])
            if piece is not None:
                self._json_read += piece[1]
                self._add_open(self._escape.extend(piece[0]))
                return
            self._json_read = None
        body = text[self._json_at:]
        read = json_call_prefix(body, self._tools, self._names, self.pairs)
        if read is None or read[0] != (self.name or read[0]):
            return
        name, pairs, last, encoded = read
        # The text ends inside that string (an escape it ends inside is read with the next piece) when a character
        # added reads as one more character of it; arguments written as a JSON string's text are read whole.
        if last is not None and not encoded and json_call_prefix(body + "x", self._tools, self._names, pairs) == (
                name, pairs, (last[0], last[1] + "x"), False):
            self._json_read = escape_begins(text, max(self._json_at, len(text) - 12))
        key = dump_arguments(last[0]) + ':"' if last else ""
        if len(pairs) != len(self.pairs) or not self._open or not self._open[0].startswith(key):
            self._grown = None
        self.name, self.pairs = name, pairs
        added = self._escape.grow(last[1]) if last else None
        if added is not None and self._grown is not None:
            self._add_open(added)
        else:
            self.open = key + self._escape.text if last else ""
        self._begun = True

    def _step(self, text: str) -> bool:
        """Reads the next parameter (True) or as much of it as is certain (False: more text is needed)."""
        pos = skip_space(text, self._pos)
        follows = follows_value(text, pos)
        if not follows:
            self._held = follows is False
            return False
        if not text.startswith(PARAM_OPEN, pos):
            self.closed, self._begun, self._grown = True, True, None
            return False
        broken = broken_param_end(text, pos)
        if broken is not None:
            self._pos = broken
            return True
        close = text.find(">", pos)
        name = text[pos + len(PARAM_OPEN):close].strip()
        if name in self._keys:
            self._held = True
            return False
        self._grown = self._grown if self._begun else None
        self._begun = True
        kind = _text_kind(self._params, name)
        key = dump_arguments(name) + ':"' if kind is not None else ""
        start = close + 1
        if start == len(text):
            # Nothing of the value yet: it may be null (is_null_word), so not even a text value's key goes out.
            self.open = ""
            return False
        start += text.startswith("\n", start)
        scan = self._scan if self._scan is not None and self._scan.start == start else ValueScan(start)
        self._scan = scan
        end, safe = scan(text)
        if end is None:
            stop = safe - (safe > start and text[safe - 1] == "\n")
            if key and not self._undecided(text, start, stop, kind):
                self._show(key, text, start, stop)
            return False
        raw = text[start:end[0]]
        value = self._params.arguments([(name, raw[:-1] if raw.endswith("\n") else raw)])
        if name in value:
            self.pairs.append(dump_arguments(value)[1:-1])
            self._grown = None
        self._keys.add(name)
        self.open, self._pos = "", end[1]
        return True

    def _undecided(self, text: str, start: int, stop: int, nullable: bool) -> bool:
        """Whether the text value from start, shown to stop, may still read as other than its text: the word null
        (tool_values.is_null_word), or for a nullable string also None or a JSON string (_undecided). Once it cannot,
        more text never makes it (its first characters stand), so it is not read whole again for every piece (which
        made a long nullable value's stream quadratic)."""
        if self._decided_at == start:
            return False
        if "null".startswith(text[start:stop].lower()) or nullable and _undecided(text[start:stop]):
            return True
        self._decided_at = start
        return False

    def _show(self, key: str, text: str, start: int, stop: int) -> None:
        """open = key and the value's text[start:stop] escaped; where the value grew at its end since the last time,
        only its new text is escaped and added."""
        at = self._open_at
        if at is not None and at[:2] == (key, start) and stop >= at[2]:
            self._add_open(_escaped(text[at[2]:stop]))
        else:
            self.open = key + _escaped(text[start:stop])
        self._open_at = (key, start, stop)

    def _add_open(self, piece: str) -> None:
        if piece:
            self._open.append(piece)
            self._open_len += len(piece)
            self._grown = None if self._grown is None else self._grown + piece
