"""Gateway process: the arguments of the one <tool_call> being written, as far as the text so far makes them certain
(tool_stream streams them): a parameter's fragment once its value certainly ends, a plain string parameter's text
as it comes, escaped, up to anything that might end it (a nullable one's once it cannot read as null). The ends are
those tool_markup's whole reading takes."""
from __future__ import annotations

import json
from typing import Optional

from gateway.tool_markup import CALL_CLOSE, CALL_OPEN, FUNCTION_CLOSE, FUNCTION_OPEN, PARAM_CLOSE, PARAM_OPEN, \
    skip_space
from gateway.tool_preview_json import json_call_prefix
from gateway.tool_values import ToolParams, untyped
from gateway.tools import dump_arguments

# Keywords a string parameter's schema may carry and still take any text as written (no enum, pattern, bounds, null
# or format that would make its value depend on the whole text).
_PLAIN_STRING_KEYS = {"type", "description", "title", "default", "examples", "$comment", "deprecated", "readOnly",
                      "writeOnly"}
# Tags that, at a line's start, may end a value whose </parameter> the model left out (tool_markup's lenient reading).
_LINE_ENDS = ("\n" + PARAM_OPEN, "\n" + FUNCTION_CLOSE, "\n" + CALL_CLOSE)


def _partial(text: str, pos: int, tags: tuple) -> bool:
    """Whether text ends at or after pos inside one of tags (the rest of the tag may still come)."""
    rest = text[pos:]
    return any(len(rest) < len(tag) and tag.startswith(rest) for tag in tags)


def _call_ends(text: str, pos: int) -> Optional[bool]:
    """Whether the call's closers are at pos (tool_markup's _Reader._call_end) and the next call follows them, as the
    whole reading asks of a call's end that is not the output's; None while the text ends too soon to tell, or where
    other text follows (the output's end says which reading takes the call)."""
    if text.startswith(FUNCTION_CLOSE, pos):
        pos = skip_space(text, pos + len(FUNCTION_CLOSE))
        if not text.startswith(CALL_CLOSE, pos):
            return _next_call(text, pos)
    elif not text.startswith(CALL_CLOSE, pos):
        return False
    return _next_call(text, skip_space(text, pos + len(CALL_CLOSE))) or None


def _next_call(text: str, pos: int) -> Optional[bool]:
    """Whether the next call starts at pos; None while the text ends too soon to tell."""
    if pos == len(text) or _partial(text, pos, (CALL_CLOSE, CALL_OPEN, FUNCTION_OPEN)):
        return None
    return text.startswith((CALL_OPEN, FUNCTION_OPEN), pos)


def _follows(text: str, pos: int) -> Optional[bool]:
    """Whether the next <parameter=NAME> or the call's end is at pos (tool_markup's _may_follow); None while the text
    ends too soon to tell."""
    if pos == len(text) or _partial(text, pos, (PARAM_OPEN, FUNCTION_CLOSE, CALL_CLOSE)):
        return None
    if not text.startswith(PARAM_OPEN, pos):
        return _call_ends(text, pos)
    close = text.find(">", pos)
    if close < 0:
        return None
    name = text[pos + len(PARAM_OPEN):close].strip()
    return bool(name) and "\n" not in name


def _value_end(text: str, start: int) -> tuple[Optional[tuple[int, int]], int]:
    """((end, index after its </parameter>) of the value from start where it certainly ends, or None; how far its
    text is certainly the value's (what may end it comes no earlier)). The ends are tool_markup's _value_ends, the
    first plain one taken: a </parameter> that the next parameter or the call's end follows, with the value's
    <parameter= lines closed."""
    safe = min([pos + 1 for pos in (text.find(tag, start - 1) for tag in _LINE_ENDS) if pos >= 0] + [len(text)])
    line = text.rfind("\n", start - 1) + 1
    if line >= start and _partial(text, line, tuple(tag[1:] for tag in _LINE_ENDS)):
        safe = min(safe, line)
    tail = text.rfind("<", max(start, len(text) - len(PARAM_CLOSE) + 1))
    if tail >= 0 and _partial(text, tail, (PARAM_CLOSE,)):
        safe = min(safe, tail)
    num_open, counted = 0, start
    close = text.find(PARAM_CLOSE, start)
    while close >= 0:
        num_open += text.count("\n" + PARAM_OPEN, counted - 1, close) - text.count(PARAM_CLOSE, counted, close)
        counted = close
        after = close + len(PARAM_CLOSE)
        follows = _follows(text, skip_space(text, after))
        if follows is not False:
            safe = min(safe, close)
        if follows and num_open <= 0:
            return (close, after), safe
        if follows is None:
            break
        close = text.find(PARAM_CLOSE, close + 1)
    return None, safe


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
        self._raw, self._escaped = "", ""

    def __call__(self, text: str) -> str:
        if not text.startswith(self._raw):
            self._raw, self._escaped = "", ""
        self._escaped += _escaped(text[len(self._raw):])
        self._raw = text
        return self._escaped


class CallPreview:
    """The arguments of one <tool_call> being written, as far as they are certain: read(text) with the call's text
    so far (from its <tool_call>) gives them, None until the call's name may go out."""

    def __init__(self, tools: list[dict], names: frozenset):
        self._tools, self._names = tools, names
        self.name: Optional[str] = None
        self._params = ToolParams()
        self._pos = -1               # where the next parameter or the call's end is read; -1 before the name
        self.pairs: list[str] = []   # the parameters read, each '"key":value' as dump_arguments writes it
        self._keys: set = set()
        self.open = ""               # the string parameter being written: '"key":"text so far'
        self.closed = False
        self._begun = False          # a parameter or the call's end was read: its name may go out
        self._held = False           # it reads no further (another form, an unknown name, a parameter given twice)
        self._json_at: Optional[int] = None   # where a JSON (Hermes) call's object begins
        self._escape = _GrowingEscape()       # the open string parameter's text, escaped

    @property
    def prefix(self) -> Optional[str]:
        if not self._begun:
            return None
        return "{" + ",".join(self.pairs + ([self.open] if self.open else [])) + ("}" if self.closed else "")

    def read(self, text: str) -> Optional[str]:
        if self._pos < 0 and not self._held and self._json_at is None:
            self._read_name(text)
        if self._json_at is not None:
            return self._read_json(text)
        while self._pos >= 0 and not (self.closed or self._held) and self._step(text):
            pass
        return self.prefix

    def _read_name(self, text: str) -> None:
        if not text.startswith(CALL_OPEN):
            self._held = True
            return
        pos = skip_space(text, len(CALL_OPEN))
        while text.startswith(CALL_OPEN, pos):
            pos = skip_space(text, pos + len(CALL_OPEN))
        if pos == len(text) or _partial(text, pos, (FUNCTION_OPEN, CALL_OPEN)):
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

    def _read_json(self, text: str) -> Optional[str]:
        """A JSON call's arguments as far as they are certain (Qwen3-Next and Qwen3 write their calls so)."""
        read = json_call_prefix(text[self._json_at:], self._tools, self._names, self.pairs)
        if read is not None and read[0] == (self.name or read[0]):
            self.name, self.pairs, last = read
            self.open = dump_arguments(last[0]) + ':"' + self._escape(last[1]) if last else ""
            self._begun = True
        return self.prefix

    def _step(self, text: str) -> bool:
        """Reads the next parameter (True) or as much of it as is certain (False: more text is needed)."""
        pos = skip_space(text, self._pos)
        follows = _follows(text, pos)
        if not follows:
            self._held = follows is False
            return False
        if not text.startswith(PARAM_OPEN, pos):
            self.closed = self._begun = True
            return False
        close = text.find(">", pos)
        name = text[pos + len(PARAM_OPEN):close].strip()
        if name in self._keys:
            self._held = True
            return False
        self._begun = True
        kind = _text_kind(self._params, name)
        key = dump_arguments(name) + ':"' if kind is not None else ""
        start = close + 1
        if start == len(text):
            self.open = "" if kind else key
            return False
        start += text.startswith("\n", start)
        end, safe = _value_end(text, start)
        if end is None:
            shown = text[start:safe]
            shown = shown[:-1] if shown.endswith("\n") else shown
            if key and not (kind and _undecided(shown)):
                self.open = key + self._escape(shown)
            return False
        raw = text[start:end[0]]
        value = self._params.arguments([(name, raw[:-1] if raw.endswith("\n") else raw)])
        if name in value:
            self.pairs.append(dump_arguments(value)[1:-1])
        self._keys.add(name)
        self.open, self._pos = "", end[1]
        return True
