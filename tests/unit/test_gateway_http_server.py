"""Requests aiohttp's own parser rejects come back as JSON in the route's API error shape, never as plain text or
a hang; header limits as vLLM's (fake scheduler, raw sockets)."""
import asyncio
import logging

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.http_server import parse_error

KEY = "sk-" + "k" * 20000
# One route per error shape: OpenAI (/v1), LM Studio (/api/v0, OpenAI's shape), Ollama (/api).
PATHS = {"openai": b"/v1/chat/completions", "lmstudio": b"/api/v0/chat/completions", "ollama": b"/api/chat"}


@pytest.fixture
async def port():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    fake.script.reply = "Hello world"
    async with fake_gateway(fake, api_key=KEY) as (client, _):
        yield client.server.port


async def _exchange(port: int, *parts: bytes) -> bytes:
    """Sends `parts` (a pause between them, so each is its own read) and returns everything until the server
    closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for i, part in enumerate(parts):
        if i:
            await asyncio.sleep(0.2)
        writer.write(part)
        await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


def _parse(raw: bytes) -> tuple[int, dict, object]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, orjson.loads(body)


def _message(api: str, body) -> str:
    """The error message, after checking the body is exactly the API's error shape."""
    if api == "ollama":
        assert list(body) == ["error"] and isinstance(body["error"], str)
        return body["error"]
    assert list(body["error"]) == ["message", "type", "param", "code"]
    return body["error"]["message"]


def _post(path: bytes, headers: bytes, body: bytes = b"") -> bytes:
    return b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n" + body


REQUESTS = {
    "request line too long": (lambda path: b"POST " + path + b"?" + b"a" * 140000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                              431, "request_header_fields_too_large", "longer than the 131072 bytes"),
    "header too long": (lambda path: _post(path, b"Cookie: " + b"c" * 140000 + b"\r\n"),
                        431, "request_header_fields_too_large", "longer than the 131072 bytes"),
    "too many headers": (lambda path: _post(path, b"".join(b"X-H%d: v\r\n" % i for i in range(300))),
                         431, "request_header_fields_too_large", "more than the 256 header fields"),
    "malformed content-length": (lambda path: _post(path, b"Content-Length: 1x\r\n", b"{}"),
                                 400, "invalid_http_request", "Invalid character in Content-Length"),
    "negative content-length": (lambda path: _post(path, b"Content-Length: -1\r\n", b"{}"),
                                400, "invalid_http_request", "Content-Length"),
    "bad chunk size": (lambda path: _post(path, b"Transfer-Encoding: chunked\r\n", b"zz\r\n{}\r\n0\r\n\r\n"),
                       400, "invalid_http_request", "Invalid character in chunk size: b'zz'"),
    "chunked and content-length": (lambda path: _post(path, b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
                                                      b"2\r\n{}\r\n0\r\n\r\n"),
                                   400, "invalid_http_request", "Transfer-Encoding can't be present"),
    "invalid method": (lambda path: b"P(ST " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                       400, "invalid_http_request", "Invalid method"),
    "invalid header name": (lambda path: _post(path, b"Bad Name: v\r\n"),
                            400, "invalid_http_request", "Invalid header token"),
}


@pytest.mark.parametrize("api", list(PATHS))
@pytest.mark.parametrize("case", list(REQUESTS))
async def test_a_request_the_parser_rejects_is_a_json_error_in_the_api_shape(port, case, api):
    make, status, code, fragment = REQUESTS[case]
    got, headers, body = _parse(await _exchange(port, make(PATHS[api])))
    assert got == status and headers["Content-Type"].startswith("application/json")
    assert fragment in _message(api, body) and "^" not in _message(api, body)
    if status == 431:  # aiohttp quotes the long line's first bytes as a Python repr: not for a client
        assert "bytearray(" not in _message(api, body) and "b'" not in _message(api, body)
    if api != "ollama":
        assert body["error"]["code"] == code and body["error"]["type"] == "invalid_request_error"
    assert headers["Access-Control-Allow-Origin"] == "*"


@pytest.mark.parametrize("case", list(REQUESTS))
async def test_a_request_the_parser_rejects_is_one_warning_line_not_an_error_traceback(port, case, caplog):
    """aiohttp logged each at ERROR with its traceback ("Error handling request from ..."): a client's fault, and a
    log flood any client could cause; uvicorn under vLLM logs a one-line warning."""
    make, status, _, fragment = REQUESTS[case]
    with caplog.at_level("DEBUG"):
        got, _, _ = _parse(await _exchange(port, make(PATHS["openai"])))
    assert got == status
    logged = [r for r in caplog.records if r.levelno > logging.DEBUG]
    assert [(r.levelname, r.getMessage()) for r in logged if r.levelno >= logging.ERROR or r.exc_info] == []
    warnings = [r.getMessage() for r in logged if r.levelname == "WARNING" and "malformed HTTP" in r.getMessage()]
    if case == "invalid method":  # on a connection's first request aiohttp logs it at DEBUG (non-HTTP traffic)
        assert warnings == []
        return
    assert len(warnings) == 1 and warnings[0].startswith("malformed HTTP request to /v1/chat/completions: ")
    assert "\n" not in warnings[0] and (fragment in warnings[0] or status == 431)


@pytest.mark.parametrize("api", list(PATHS))
async def test_a_bad_chunk_after_the_handler_started_is_a_400_not_a_hang(port, api, caplog):
    """aiohttp's C parser drops the body stream without an error when the chunk size that breaks it comes in a
    later read: the handler reading the body waited forever."""
    head = _post(PATHS[api], b"Authorization: Bearer " + KEY.encode() + b"\r\nTransfer-Encoding: chunked\r\n",
                 b"2\r\n{}\r\n")
    with caplog.at_level("INFO"):
        got, headers, body = _parse(await _exchange(port, head, b"zz\r\n{}\r\n0\r\n\r\n"))
    assert got == 400 and headers["Connection"] == "close"
    assert _message(api, body) == "malformed HTTP request body: Invalid character in chunk size: b'zz'"
    # aiohttp reads what is left of the body after the answer: it logged an ERROR "Unhandled exception" traceback.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "malformed HTTP request to " + PATHS[api].decode() + ": Invalid character in chunk size: b'zz'"]


async def test_a_20_kib_bearer_token_and_200_headers_are_served(port):
    """uvicorn/h11 under vLLM takes 256 headers and 4 MiB of them; aiohttp's defaults stopped at 8190 bytes a field
    and 128 fields."""
    headers = b"Authorization: Bearer " + KEY.encode() + b"\r\nConnection: close\r\n"
    headers += b"".join(b"X-H%d: v\r\n" % i for i in range(200))
    got, _, body = _parse(await _exchange(port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n"))
    assert got == 200 and body["object"] == "list"


def test_a_handler_fault_outside_the_middlewares_is_a_typed_500_or_504():
    assert parse_error(500, RuntimeError("boom")).to_dict()["error"] == {
        "message": "internal error", "type": "server_error", "param": None, "code": "internal_error"}
    assert parse_error(504, None).status == 504
