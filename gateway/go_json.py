"""Gateway process: a request body that is no JSON, worded as Go's encoding/json Decoder words it (Ollama's 400).

Ollama's handlers bind a body with gin's ShouldBindJSON, a json.Decoder reading one value, and answer its error as
it is (server/routes.go): `invalid character 'x' looking for beginning of object key string`, `unexpected EOF`.
The scan follows encoding/json/scanner.go's states and their words; it runs only for a body orjson refused. A body
Go reads where orjson refuses it is served as Ollama reads it (go_decode).
"""
from __future__ import annotations

import codecs
import json
import re
import unicodedata
from typing import Any, Optional

from aiohttp import web

from gateway.body import read_body
from gateway.errors import InvalidRequest
from gateway.offload import run_cpu
from gateway.web import BODY_LIMIT_KEY, DEFAULT_BODY_LIMIT, NOT_JSON, NOT_UTF8, check_depth, read_json

_SPACE = re.compile(rb"[ \t\r\n]*")
_STRING_RUN = re.compile(rb'[^"\\\x00-\x1f]*')
_DIGITS = re.compile(rb"[0-9]*")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = frozenset(b'bfnrt\\/"')
_LITERALS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}
# What the scan expects next, and the parse states of encoding/json's scanner (parseObjectKey, parseObjectValue,
# parseArrayValue).
_VALUE, _VALUE_OR_CLOSE, _KEY, _KEY_OR_CLOSE, _AFTER = range(5)
_OBJECT_KEY, _OBJECT_VALUE, _ARRAY = range(3)
_AFTER_WORDS = {_OBJECT_KEY: "after object key", _OBJECT_VALUE: "after object key:value pair",
                _ARRAY: "after array element"}
# Go's strconv.Quote escapes of the ASCII controls it names.
_NAMED = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 92: "\\\\"}


class _Unexpected(Exception):
    """The body ended inside its value (Go's io.ErrUnexpectedEOF)."""


class _Syntax(Exception):
    """A byte Go's scanner refuses, with its words."""


def _quote_char(c: int) -> str:
    """encoding/json quoteChar: the byte read as a rune, as strconv.Quote writes it, between single quotes."""
    if c == 0x27:
        return "'\\''"
    if c == 0x22:
        return "'\"'"
    char = chr(c)
    if c in _NAMED:
        text = _NAMED[c]
    elif c < 0x20 or c == 0x7F:
        text = f"\\x{c:02x}"
    elif char == " " or unicodedata.category(char)[0] in "LMNPS":
        text = char
    else:
        text = f"\\u{c:04x}"
    return f"'{text}'"


def _error(raw: bytes, pos: int, context: str) -> _Syntax:
    return _Syntax(f"invalid character {_quote_char(raw[pos])} {context}")


def _byte(raw: bytes, pos: int) -> int:
    if pos >= len(raw):
        raise _Unexpected
    return raw[pos]


def _string(raw: bytes, pos: int) -> int:
    """The position after the string whose opening quote is before pos (stateInString and its escapes)."""
    while True:
        pos = _STRING_RUN.match(raw, pos).end()
        c = _byte(raw, pos)
        if c == 0x22:
            return pos + 1
        if c != 0x5C:
            raise _error(raw, pos, "in string literal")
        escape = _byte(raw, pos + 1)
        pos += 2
        if escape == 0x75:
            for pos in range(pos, pos + 4):
                if _byte(raw, pos) not in _HEX:
                    raise _error(raw, pos, "in \\u hexadecimal character escape")
            pos += 1
        elif escape not in _ESCAPES:
            raise _error(raw, pos - 1, "in string escape code")


def _number(raw: bytes, pos: int) -> int:
    """The position after the number at pos (stateNeg, state0, state1, stateDot, stateE and their words)."""
    if raw[pos] == 0x2D:
        pos += 1
        if not 0x30 <= _byte(raw, pos) <= 0x39:
            raise _error(raw, pos, "in numeric literal")
    pos = pos + 1 if raw[pos] == 0x30 else _DIGITS.match(raw, pos).end()
    if pos < len(raw) and raw[pos] == 0x2E:
        if not 0x30 <= _byte(raw, pos + 1) <= 0x39:
            raise _error(raw, pos + 1, "after decimal point in numeric literal")
        pos = _DIGITS.match(raw, pos + 1).end()
    if pos < len(raw) and raw[pos] in b"eE":
        pos += 1 + (_byte(raw, pos + 1) in b"+-")
        if not 0x30 <= _byte(raw, pos) <= 0x39:
            raise _error(raw, pos, "in exponent of numeric literal")
        pos = _DIGITS.match(raw, pos).end()
    return pos


def _literal(raw: bytes, pos: int) -> int:
    word = _LITERALS[raw[pos]]
    for i in range(1, len(word)):
        if _byte(raw, pos + i) != word[i]:
            raise _error(raw, pos + i, f"in literal {word.decode()} (expecting {_quote_char(word[i])})")
    return pos + len(word)


def _close(stack: list, raw: bytes, pos: int) -> None:
    """stateEndValue: the byte after a value, inside the object or array on top of stack."""
    top, c = stack[-1], raw[pos]
    if top == _OBJECT_KEY and c == 0x3A:
        stack[-1] = _OBJECT_VALUE
    elif top == _OBJECT_VALUE and c == 0x2C:
        stack[-1] = _OBJECT_KEY
    elif (top == _OBJECT_VALUE and c == 0x7D) or (top == _ARRAY and c == 0x5D):
        stack.pop()
    elif not (top == _ARRAY and c == 0x2C):
        raise _error(raw, pos, _AFTER_WORDS[top])


def _scan(raw: bytes) -> int:
    """Reads raw's first JSON value as json.Decoder does; returns the position after it once it is whole (the rest is
    never read)."""
    stack, expect, pos = [], _VALUE, 0
    while True:
        pos = _SPACE.match(raw, pos).end()
        c = _byte(raw, pos)
        if expect == _AFTER:
            _close(stack, raw, pos)
            expect = (_AFTER if c in b"}]" else _KEY if c == 0x2C and stack[-1] == _OBJECT_KEY else _VALUE)
            if not stack:
                return pos + 1
            pos += 1
        elif (expect == _KEY_OR_CLOSE and c == 0x7D) or (expect == _VALUE_OR_CLOSE and c == 0x5D):
            stack.pop()
            if not stack:
                return pos + 1
            expect, pos = _AFTER, pos + 1
        elif expect in (_KEY, _KEY_OR_CLOSE):
            if c != 0x22:
                raise _error(raw, pos, "looking for beginning of object key string")
            expect, pos = _AFTER, _string(raw, pos + 1)
        elif c in b"{[":
            stack.append(_OBJECT_KEY if c == 0x7B else _ARRAY)
            expect, pos = (_KEY_OR_CLOSE if c == 0x7B else _VALUE_OR_CLOSE), pos + 1
        else:
            pos = _scalar(raw, pos)
            if not stack:
                return pos
            expect = _AFTER


def _scalar(raw: bytes, pos: int) -> int:
    c = raw[pos]
    if c == 0x22:
        return _string(raw, pos + 1)
    if c == 0x2D or 0x30 <= c <= 0x39:
        return _number(raw, pos)
    if c in _LITERALS:
        return _literal(raw, pos)
    raise _error(raw, pos, "looking for beginning of value")


def go_decode_error(raw: bytes) -> Optional[str]:
    """Go's Decoder error for raw (a body with something in it), or None where Go reads a whole first value."""
    try:
        _scan(raw)
    except _Unexpected:
        return "unexpected EOF"
    except _Syntax as exc:
        return str(exc)
    return None


def _rune_error(exc: UnicodeDecodeError) -> tuple:
    """utf8.DecodeRune's reading of bytes that are no UTF-8, as encoding/json's unquote takes it: one U+FFFD a byte."""
    return "\ufffd", exc.start + 1


codecs.register_error("go_rune_error", _rune_error)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_surrogates(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _finite(text: str) -> float:
    """A JSON number as a float; ValueError past float range, which Go's float64 refuses too (UnmarshalTypeError)."""
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is past float range")
    return number


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is no JSON value")


# The json module's C scanner, refusing what it reads and Go's scanner does not (NaN, Infinity, -Infinity).
_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_refuse_constant)


def go_decode_fast(raw: bytes) -> Any:
    """go_decode's value read by the json module's C scanner, whose raw_decode reads the first value and leaves the
    rest, as Go's Decoder does; ValueError or RecursionError where it cannot read it, for go_decode_error and
    go_decode. Their scan runs in Python a token at a time: a 3 MB /api/generate body of token ids with a byte after
    its object took 11 s of CPU to read, 17 s with a byte that is no UTF-8 in its prompt (a 32 MiB body, minutes)."""
    text = raw.decode("utf-8", "go_rune_error")
    return _as_go_reads(_DECODER.raw_decode(text, len(text) - len(text.lstrip(" \t\r\n")))[0])


def go_decode(raw: bytes) -> Any:
    """The value Go's json.Decoder reads from raw (one go_decode_error passes): its first value alone, and in its
    strings each byte that is no UTF-8 and each \\u surrogate that pairs with nothing a U+FFFD ("invalid UTF-8 or
    invalid UTF-16 surrogate pairs are not treated as an error", encoding/json's Unmarshal doc). json.loads keeps a
    lone surrogate as one, so the replacement comes after."""
    return _as_go_reads(json.loads(raw[:_scan(raw)].decode("utf-8", "go_rune_error"), parse_float=_finite))


def _as_go_reads(body: Any) -> Any:
    """A decoded body with each lone surrogate in its strings and keys a U+FFFD, its depth checked."""
    check_depth(body)
    nodes = [body]
    while nodes:
        node = nodes.pop()
        pairs = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in list(pairs):
            if isinstance(value, str):
                node[key] = _no_surrogates(value)
            elif isinstance(value, (dict, list)):
                nodes.append(value)
            if isinstance(key, str) and _SURROGATE.search(key):
                node[_no_surrogates(key)] = node.pop(key)
    return _no_surrogates(body) if isinstance(body, str) else body


async def read_go_json(request: web.Request) -> Any:
    """read_json, with a body that is no JSON refused in Go's words, as Ollama's handlers refuse it; one Go reads
    (what follows a whole first value, bytes that are no UTF-8 or lone surrogates in a string) is read as Go reads it,
    as Ollama serves it, where it was a 400."""
    try:
        return await read_json(request)
    except InvalidRequest as exc:
        if not exc.message.startswith((NOT_JSON, NOT_UTF8)):
            raise
        raw = await read_body(request, request.app.get(BODY_LIMIT_KEY, DEFAULT_BODY_LIMIT))
        try:
            return go_decode_fast(raw) if len(raw) < 65536 else await run_cpu(go_decode_fast, raw)
        except (ValueError, RecursionError):
            pass
        words = go_decode_error(raw) if len(raw) < 65536 else await run_cpu(go_decode_error, raw)
        if words is not None:
            raise InvalidRequest(words, code="invalid_json") from None
        try:
            return go_decode(raw) if len(raw) < 65536 else await run_cpu(go_decode, raw)
        except (ValueError, RecursionError):
            # What Go's scanner passes and its types refuse (a number past float range): the 400 as it was.
            raise exc from None
