"""Gateway process: JSON in and out of aiohttp with orjson; malformed bodies become typed 400s."""
from __future__ import annotations

import json
from typing import Any

import orjson
from aiohttp import web

from gateway import json_out
from gateway.body import read_body, take_handed_on
from gateway.errors import ApiError, InvalidRequest
from gateway.offload import run_cpu

BODY_LIMIT_KEY = web.AppKey("max_body_bytes", int)
DEFAULT_BODY_LIMIT = 32 * 1024 * 1024
# orjson reads an integer outside [-2^63, 2^64) as a float (123456789012345678901 -> 1.2345678901234568e+20). Such a
# number in a JSON Schema const/enum, a tool argument or an option must stay exact, as Python's json (vLLM) and Go's
# json.RawMessage (Ollama) keep it: a body holding a float of that size is read again with json (_rounded_integer).
_INT64_BOUND = 2.0 ** 63
# Deepest nesting of objects and arrays a body may have. What reads a body further on recurses per level (jsonschema
# checking a schema, the copy and grammar of a schema, the template's tojson, json re-reading long integers), and Python
# stops that near 1000 frames with a RecursionError, a 500: a schema 100 objects deep did. No API body needs more.
MAX_BODY_DEPTH = 64
# The 400 for a body with nothing in it (or only whitespace); Ollama's routes answer it in Ollama's words.
EMPTY_BODY = "the request body is empty; send a JSON object"
# The start of the 400 for a body that is no JSON; Ollama's routes answer it in Go's words (gateway/go_json.py).
NOT_JSON = "the request body is not valid JSON"
# The start of the 400 for a body that is no UTF-8 (Ollama's routes read it as Go does: gateway/go_json.py).
NOT_UTF8 = "the request body is not valid UTF-8"


def _utf8(raw: bytes) -> bytes:
    """raw as UTF-8 JSON text: a UTF-8 byte order mark dropped (RFC 8259 lets a parser ignore it; PowerShell 5
    sends one) and UTF-16/32 text transcoded, detected as Python's json.loads (so vLLM) detects it."""
    encoding = json.detect_encoding(raw[:4])
    if encoding == "utf-8":
        return raw
    try:
        return raw.decode(encoding).encode("utf-8")
    except UnicodeError as exc:
        raise InvalidRequest(f"the request body is not valid {encoding} text: {exc}", code="invalid_json") from exc


def _parse(raw: bytes) -> Any:
    raw = _utf8(raw)
    if not raw.strip():
        raise InvalidRequest(EMPTY_BODY, code="invalid_json")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        _check_utf8(raw)
        raise InvalidRequest(f"{NOT_JSON}: {exc}", code="invalid_json") from exc
    check_depth(body)
    # orjson accepted it, so it is strict JSON (no NaN, no lone surrogate) and json reads it the same, ints exact.
    return json.loads(raw) if _rounded_integer(body) else body


def _rounded_integer(body: Any) -> bool:
    """Whether orjson may have read an integer as a float: the body holds a float of magnitude 2^63 or more, which
    every integer it cannot hold becomes. Found by walking the values, not by scanning the text for 19 digits: a
    regular expression over a 30 MB prompt held the GIL for 0.5 s in the parsing thread, so every stream and /health
    stalled that long (the body limit is 32 MiB; six such bodies at once froze them for 3.5 s)."""
    nodes = [[body]]
    while nodes:
        values = nodes.pop()
        kinds = set(map(type, values))  # in C: a list of a million token ids takes milliseconds
        if float in kinds and any(not -_INT64_BOUND < value < _INT64_BOUND for value in values if type(value) is float):
            return True
        if dict in kinds or list in kinds:
            nodes.extend(value.values() if type(value) is dict else value for value in values
                         if type(value) in (dict, list))
    return False


def _check_utf8(raw: bytes) -> None:
    """400 naming the first byte that is not UTF-8. orjson words any such body "str is not valid UTF-8: surrogates
    not allowed: line 1 column 1 (char 0)", which points at neither the byte nor its place."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"{NOT_UTF8}: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
                             f"({exc.reason}); send JSON text encoded as UTF-8", code="invalid_json") from None


def check_depth(body: Any) -> None:
    """400 for objects and arrays nested deeper than MAX_BODY_DEPTH (counted without recursing)."""
    level, depth = [body], 0
    while level:
        depth += 1
        if depth > MAX_BODY_DEPTH:
            raise InvalidRequest(f"the request body nests objects and arrays more than {MAX_BODY_DEPTH} levels deep; "
                                 f"at most {MAX_BODY_DEPTH} are accepted", code="invalid_json")
        level = [child for node in level
                 for child in (node.values() if isinstance(node, dict) else node if isinstance(node, list) else ())
                 if isinstance(child, (dict, list))]


async def read_json(request: web.Request) -> Any:
    """The parsed body; InvalidRequest for an empty, non-UTF-8, malformed or badly encoded body."""
    handed_on = take_handed_on(request)
    if handed_on is not None:
        return handed_on
    limit = request.app.get(BODY_LIMIT_KEY, DEFAULT_BODY_LIMIT)
    raw = await read_body(request, limit)
    # Small bodies parse faster than a thread hop; big ones must not hold the loop.
    return _parse(raw) if len(raw) < 65536 else await run_cpu(_parse, raw)


def json_response(body: Any, status: int = 200, headers: dict | None = None,
                  charset: str | None = None) -> web.Response:
    """A JSON response: the body as compact JSON (orjson), application/json with an optional charset."""
    return web.Response(body=json_out.dumps(body), status=status, headers=headers,
                        content_type="application/json", charset=charset)


def error_response(error: ApiError) -> web.Response:
    """An ApiError as its API's error body (ApiError.to_json), with its status and headers (Retry-After, ...)."""
    return web.Response(body=error.to_json(), status=error.status, headers=error.headers,
                        content_type="application/json")
