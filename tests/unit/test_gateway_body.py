"""Gateway: request bodies with Content-Encoding, and errors in each API's shape on every route (fake scheduler)."""
import asyncio
import gzip
import zlib

import aiohttp
import orjson
import pytest

from gateway.app import ENGINE_KEY, create_app
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig
from gateway.fake_scheduler import FakeServing, build_tokenizer, start_fake_server, start_test_client

LIMIT = 1 << 20
ROUTES = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
    "/v1/completions": {"prompt": "hi", "max_tokens": 2},
    "/api/v0/completions": {"prompt": "hi", "max_tokens": 2},
    "/api/generate": {"model": "default", "prompt": "hi", "stream": False, "options": {"num_predict": 2}},
    "/api/chat": {"model": "default", "messages": [{"role": "user", "content": "hi"}], "stream": False},
}
IDS = [path.strip("/").replace("/", "-") for path in ROUTES]


async def _client(api_key=None):
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    fake.script.reply = "Hi"
    server, addr = await start_fake_server(fake)
    config = GatewayConfig(scheduler_addr=addr, api_key=api_key, max_body_bytes=LIMIT)
    # One connection: a request after a refused body must reuse (or cleanly reopen) the keep-alive connection.
    client = await start_test_client(create_app(config, SchedulerClient(addr)),
                                     connector=aiohttp.TCPConnector(limit=1))
    return client, server


@pytest.fixture
async def client():
    client, server = await _client()
    yield client
    await client.close()
    await server.stop(None)


def _error(path: str, raw: bytes) -> str:
    """The error message, after checking the route's shape: Ollama {"error": str} on /api/*, else OpenAI's object."""
    body = orjson.loads(raw)
    if path.startswith("/api/") and not path.startswith("/api/v0/"):
        assert set(body) == {"error"} and isinstance(body["error"], str)
        return body["error"]
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]["message"]


async def _send(client, path, data: bytes, encoding: str):
    response = await client.post(path, data=data, headers={"Content-Encoding": encoding,
                                                           "Content-Type": "application/json"})
    return response.status, await response.read()


async def _still_serves(client, path):
    response = await client.post(path, data=orjson.dumps(ROUTES[path]))
    assert response.status == 200, await response.read()


def _body(path: str) -> bytes:
    return orjson.dumps(ROUTES[path])


@pytest.mark.parametrize("path", list(ROUTES), ids=IDS)
@pytest.mark.parametrize("encoding,data", [
    ("gzip", lambda b: gzip.compress(b)), ("x-gzip", lambda b: gzip.compress(b)),
    ("deflate", lambda b: zlib.compress(b)), ("deflate", lambda b: zlib.compress(b)[2:-4]),
    ("identity", lambda b: b), ("gzip, identity", lambda b: gzip.compress(b)),
], ids=["gzip", "x-gzip", "deflate-zlib", "deflate-raw", "identity", "gzip-identity"])
async def test_encoded_bodies_are_decoded(client, path, encoding, data):
    status, raw = await _send(client, path, data(_body(path)), encoding)
    assert status == 200, raw


@pytest.mark.parametrize("path", list(ROUTES), ids=IDS)
@pytest.mark.parametrize("data,expected", [
    (lambda b: b"xx", "is not valid gzip data"),
    (lambda b: gzip.compress(b)[:-8], "is not a complete gzip stream"),
    (lambda b: gzip.compress(b)[:12], "is not a complete gzip stream"),
    (lambda b: gzip.compress(b) + b"junk", "is not a complete gzip stream"),
    (lambda b: b, "is not valid gzip data"),
], ids=["garbage", "no-trailer", "cut", "trailing-bytes", "not-compressed"])
async def test_corrupt_or_truncated_gzip_is_400_and_the_connection_serves_on(client, path, data, expected):
    status, raw = await _send(client, path, data(_body(path)), "gzip")
    assert status == 400 and expected in _error(path, raw)
    await _still_serves(client, path)


@pytest.mark.parametrize("path", list(ROUTES), ids=IDS)
@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, br"])
async def test_unsupported_encoding_is_415_in_the_route_shape(client, path, encoding):
    status, raw = await _send(client, path, b"\x00\x01 not decodable", encoding)
    message = _error(path, raw)
    assert status == 415 and "is not supported; send the body as identity, gzip or deflate" in message
    assert "install" not in message
    await _still_serves(client, path)


@pytest.mark.parametrize("path", list(ROUTES), ids=IDS)
async def test_a_body_too_large_once_decoded_is_413(client, path):
    bomb = gzip.compress(b"{" + b" " * (4 * LIMIT) + b"}")
    status, raw = await _send(client, path, bomb, "gzip")
    assert status == 413 and f"larger than {LIMIT} bytes once decoded" in _error(path, raw)
    await _still_serves(client, path)


async def test_openai_error_code_of_a_bad_encoding(client):
    status, raw = await _send(client, "/v1/chat/completions", b"xx", "gzip")
    error = orjson.loads(raw)["error"]
    assert status == 400 and error["type"] == "invalid_request_error" and error["code"] == "invalid_encoding"
    status, raw = await _send(client, "/v1/chat/completions", b"xx", "br")
    error = orjson.loads(raw)["error"]
    assert status == 415 and error["code"] == "unsupported_content_encoding" and error["param"] == "Content-Encoding"


@pytest.mark.parametrize("method,path,status,message", [
    ("GET", "/api/chat", 405, "method GET not allowed on /api/chat; use POST"),
    ("GET", "/api/generate", 405, "method GET not allowed on /api/generate; use POST"),
    ("POST", "/api/tags", 405, "method POST not allowed on /api/tags; use GET, HEAD"),
    ("POST", "/api/nope", 404, "no route /api/nope"),
    ("GET", "/api/show/x", 404, "no route /api/show/x"),
])
async def test_ollama_routing_errors_use_ollama_shape(client, method, path, status, message):
    response = await client.request(method, path)
    assert response.status == status and await response.json() == {"error": message}
    if status == 405:
        # RFC 9110: a 405 names the methods the route takes.
        assert response.headers["Allow"] == message.split("; use ")[1]


@pytest.mark.parametrize("method,path,status", [("GET", "/v1/chat/completions", 405), ("POST", "/v1/nope", 404),
                                                ("GET", "/api/v0/chat/completions", 405),
                                                ("POST", "/api/v0/nope", 404)])
async def test_openai_and_lmstudio_routing_errors_keep_openai_shape(client, method, path, status):
    response = await client.request(method, path)
    assert response.status == status
    assert set((await response.json())["error"]) == {"message", "type", "param", "code"}


async def test_api_key_errors_use_each_routes_shape():
    client, server = await _client(api_key="secret")
    try:
        for path in ("/api/tags", "/api/ps", "/api/chat", "/api/generate"):
            response = await client.request("GET" if path in ("/api/tags", "/api/ps") else "POST", path)
            assert response.status == 401
            assert await response.json() == {
                "error": "missing or invalid API key: send 'Authorization: Bearer <key>'"}
        for path in ("/v1/models", "/api/v0/models"):
            response = await client.get(path)
            assert response.status == 401 and (await response.json())["error"]["code"] == "invalid_api_key"
        ok = await client.get("/api/tags", headers={"Authorization": "Bearer secret"})
        assert ok.status == 200
    finally:
        await client.close()
        await server.stop(None)


async def test_internal_errors_use_each_routes_shape(client):
    async def broken_card():
        raise RuntimeError("boom")

    client.server.app[ENGINE_KEY].card = broken_card
    response = await client.get("/api/tags")
    assert response.status == 500 and await response.json() == {"error": "internal error: RuntimeError('boom')"}
    response = await client.get("/v1/models")
    error = (await response.json())["error"]
    assert response.status == 500 and error["code"] == "internal_error" and "boom" in error["message"]


@pytest.mark.parametrize("path", list(ROUTES), ids=IDS)
async def test_a_content_length_past_the_limit_is_413_before_the_body_is_read(client, path):
    """As nginx's client_max_body_size answers it (and the Expect: 100-continue handler did already): the body was read
    first (up to 32 MiB buffered for nothing), and one that never came got the body timeout's 408."""
    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    try:
        writer.write(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n{\"a\": 1" % (LIMIT + 1))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        raw = await reader.readexactly(length)
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 413 ") and b"Connection: close" in head
    assert _error(path, raw) == (f"request body too large: its Content-Length ({LIMIT + 1} bytes) is more than the "
                                 f"{LIMIT} bytes this server accepts")
