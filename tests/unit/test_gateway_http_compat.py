"""Gateway HTTP details from real client reports: CORS preflight, trailing slashes, integral floats, Expect:
100-continue (fake scheduler)."""
import asyncio

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    fake.script.reply = "Hello world"
    async with fake_gateway(fake, api_key="sk-test") as pair:
        yield pair


AUTH = {"Authorization": "Bearer sk-test"}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models", "/api/chat", "/api/v0/chat/completions"])
async def test_cors_preflight_is_2xx_with_the_allow_headers_and_needs_no_key(stack, path):
    client, _ = stack
    response = await client.options(path, headers={"Origin": "http://localhost:3000",
                                                    "Access-Control-Request-Method": "POST",
                                                    "Access-Control-Request-Headers": "authorization,content-type"})
    # vLLM (Starlette) answers 200, Ollama (gin-contrib/cors) 204.
    assert response.status == (204 if path == "/api/chat" else 200)
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in response.headers["Access-Control-Allow-Methods"]
    assert response.headers["Access-Control-Allow-Headers"] == "authorization,content-type"


async def test_preflight_on_an_unknown_route_is_still_404(stack):
    client, _ = stack
    response = await client.options("/v1/nope", headers={**AUTH, "Origin": "http://x"})
    assert response.status == 404


@pytest.mark.parametrize("stream", [False, True])
async def test_every_response_carries_the_cors_origin_header(stack, stream):
    client, _ = stack
    response = await client.post("/v1/chat/completions", headers={**AUTH, "Origin": "http://x"},
                                 data=orjson.dumps({"messages": USER, "max_tokens": 2, "stream": stream}))
    assert response.status == 200 and response.headers["Access-Control-Allow-Origin"] == "*"
    await response.read()
    denied = await client.get("/v1/models", headers={"Origin": "http://x"})
    assert denied.status == 401 and denied.headers["Access-Control-Allow-Origin"] == "*"


@pytest.mark.parametrize("method, path, body", [
    ("POST", "/v1/chat/completions/", {"messages": USER, "max_tokens": 2}),
    ("POST", "/v1/completions/", {"prompt": "Hello", "max_tokens": 2}),
    ("GET", "/v1/models/", None),
    ("GET", "/v1/models/fake-model/", None),
    ("POST", "/api/chat/", {"model": "default", "messages": USER, "stream": False, "options": {"num_predict": 2}}),
    ("GET", "/api/tags/", None),
])
async def test_a_trailing_slash_is_served_like_the_route(stack, method, path, body):
    client, _ = stack
    response = await client.request(method, path, headers=AUTH, data=None if body is None else orjson.dumps(body),
                                    allow_redirects=False)
    assert response.status == 200, await response.text()
    slashless = await client.request(method, path.rstrip("/"), headers=AUTH,
                                     data=None if body is None else orjson.dumps(body))
    assert set(orjson.loads(await response.read())) == set(orjson.loads(await slashless.read()))


async def test_open_paths_stay_open_with_a_trailing_slash(stack):
    client, _ = stack
    assert (await client.get("/health/")).status == 200


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 3.0, "n": 2.0, "seed": 7.0, "top_k": 5.0,
                              "min_tokens": 1.0, "top_logprobs": 1.0, "logprobs": True, "stop_token_ids": [3.0]}),
    ("/v1/completions", {"prompt": [5.0, 6.0, 7.0], "max_tokens": 3.0, "logprobs": 1.0,
                         "truncate_prompt_tokens": 2.0}),
])
async def test_integral_floats_are_read_as_integers(stack, path, body):
    """JSON Schema counts 3.0 as an integer (pydantic, so vLLM, accepts it): it must not reach the scheduler as a
    float (that left the request hanging) but be read as 3."""
    client, fake = stack
    response = await client.post(path, headers=AUTH, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    request = fake.script.requests[-1]
    assert request.max_tokens == 3
    answer = orjson.loads(await response.read())
    assert answer["usage"]["completion_tokens"] <= 3 * len(answer["choices"])


@pytest.mark.parametrize("field, value", [("max_tokens", 3.5), ("n", 1.5), ("seed", 0.5)])
async def test_fractional_values_of_integer_fields_are_400(stack, field, value):
    client, _ = stack
    response = await client.post("/v1/chat/completions", headers=AUTH,
                                 data=orjson.dumps({"messages": USER, field: value}))
    assert response.status == 400
    assert orjson.loads(await response.read())["error"]["param"] == field


async def _raw_exchange(client, head: bytes, body: bytes = b"", wait_s: float = 2.0) -> bytes:
    """Sends head, then body only after a "100 Continue"; returns what the server sent."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(head)
    await writer.drain()
    received = b""
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), wait_s)
            if not chunk:
                break
            received += chunk
            if body and b"100 Continue" in received:
                writer.write(body)
                body = b""
            if b"\r\n\r\n{" in received and received.rstrip().endswith(b"}"):
                break
    except asyncio.TimeoutError:
        pass
    writer.close()
    return received


@pytest.mark.parametrize("path, shape", [("/v1/chat/completions", "openai"), ("/api/chat", "ollama")])
async def test_expect_continue_with_an_oversized_body_is_413_before_the_body(stack, path, shape):
    client, _ = stack
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-test\r\nContent-Type: application/json\r\n"
            f"Content-Length: {200 * 1024 * 1024}\r\nExpect: 100-continue\r\n\r\n").encode()
    received = await _raw_exchange(client, head)
    assert received.startswith(b"HTTP/1.1 413"), received[:200]
    assert b"100 Continue" not in received
    error = orjson.loads(received.split(b"\r\n\r\n", 1)[1])["error"]
    assert "larger than" in (error["message"] if shape == "openai" else error)


async def test_expect_continue_without_the_api_key_is_401_before_the_body(stack):
    client, _ = stack
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 5000\r\nExpect: 100-continue\r\n\r\n")
    received = await _raw_exchange(client, head)
    assert received.startswith(b"HTTP/1.1 401") and b"100 Continue" not in received
    assert orjson.loads(received.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "authentication_error"


async def test_expect_continue_with_a_small_body_is_served(stack):
    client, _ = stack
    body = orjson.dumps({"messages": USER, "max_tokens": 2})
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-test\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n").encode()
    received = await _raw_exchange(client, head, body)
    assert received.startswith(b"HTTP/1.1 100 Continue") and b"HTTP/1.1 200 OK" in received
    assert b'"chat.completion"' in received


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 2}),
    ("/api/chat", {"model": "default", "messages": USER, "stream": False, "options": {"num_predict": 2}}),
])
@pytest.mark.parametrize("encode", [lambda text: b"\xef\xbb\xbf" + text.encode(), lambda text: text.encode("utf-16"),
                                    lambda text: text.encode("utf-16-le")], ids=["utf8-bom", "utf16", "utf16le"])
async def test_a_bom_or_utf16_json_body_is_read(stack, path, body, encode):
    """PowerShell 5 sends UTF-8 JSON with a BOM (RFC 8259 lets a parser ignore it), .NET clients UTF-16; Python's
    json.loads (so vLLM) detects both, where a strict UTF-8 parser answered 400."""
    client, _ = stack
    response = await client.post(path, headers={**AUTH, "Content-Type": "application/json"},
                                 data=encode(orjson.dumps(body).decode()))
    assert response.status == 200, await response.text()


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stream": True}),
    ("/v1/completions", {"prompt": "hi", "stream": True}),
    ("/v1/completions", {"prompt": "hi", "stream": True, "echo": True, "max_tokens": 0}),
    ("/api/generate", {"model": "default", "prompt": "hi"}),
], ids=["chat-sse", "completions-sse", "echo-only-sse", "ollama-ndjson"])
async def test_http10_keep_alive_stream_ends_with_the_connection(stack, path, body):
    """HTTP/1.0 has no chunked framing, so a stream's end is the end of the connection: an HTTP/1.0 client that
    asked to keep the connection (`ab -k`, old proxies) got the whole stream and then waited forever."""
    client, _ = stack
    data = orjson.dumps(body)
    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    writer.write(f"POST {path} HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nContent-Type: application/json\r\n"
                 f"Authorization: Bearer sk-test\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    try:
        raw = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") and b"keep-alive" not in head.lower()
    assert payload.rstrip().endswith(b"data: [DONE]" if path.startswith("/v1") else b"}")


async def test_every_get_route_answers_head_as_its_get(stack):
    """RFC 9110 9.3.2: HEAD is GET without the content. aiohttp's add_get registers both, add_route("GET") only
    GET: LM Studio's /api/v1/models/download/status and SGLang's /flush_cache answered HEAD with a 405 (their
    slashed twins, made by add_get, did not)."""
    client, _ = stack
    paths = {route.resource.canonical for route in client.app.router.routes()
             if route.method == "GET" and "{" not in route.resource.canonical}
    for path in sorted(paths):
        head = await client.head(path, headers=AUTH)
        get = await client.get(path, headers=AUTH)
        assert (path, head.status) == (path, get.status)
        assert head.headers.get("Content-Type") == get.headers.get("Content-Type")


@pytest.mark.parametrize("method, path, body, key", [
    ("POST", "//v1/chat/completions", {"messages": USER, "max_tokens": 2}, "choices"),
    ("GET", "/v1//models", None, "data"),
    ("POST", "//v1/messages", {"model": "default", "max_tokens": 2, "messages": USER}, "content"),
    ("POST", "//api/chat", {"model": "default", "messages": USER, "stream": False}, "message"),
    ("GET", "//api//tags/", None, "models"),
    ("POST", "//completion?api-version=2024-02-01", {"prompt": "hi", "n_predict": 2}, "content"),
])
async def test_doubled_slashes_are_read_as_one(stack, method, path, body, key):
    """A base URL ending in '/' joined with a path starting with one (litellm-vscode-chat#53: `https://host//v1/model/
    info`) is served as nginx's merge_slashes reads it, not a 404."""
    client, _ = stack
    headers = {**AUTH, "anthropic-version": "2023-06-01"}
    # The test client refuses a path it would read as a host ('//v1'): the session gets the whole URL.
    url = str(client.make_url("/")).rstrip("/") + path
    response = await client.session.request(method, url, headers=headers,
                                            data=None if body is None else orjson.dumps(body))
    assert response.status == 200, await response.text()
    assert key in orjson.loads(await response.read())


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 2, "stream": True}),
    ("/v1/messages", {"model": "default", "max_tokens": 2, "messages": USER, "stream": True}),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 2, "stream": True}),
    ("/api/chat", {"model": "default", "messages": USER}),
    ("/api/v1/chat", {"model": "default", "input": "hi", "max_output_tokens": 2, "stream": True}),
    ("/completion", {"prompt": "hi", "n_predict": 2, "stream": True}),
])
async def test_every_stream_tells_proxies_not_to_buffer_or_compress_it(stack, path, body):
    """nginx holds a stream without X-Accel-Buffering: no (llama.cpp#20872), and a compressing proxy (Caddy's encode,
    Traefik's compress) holds small events in its encoder's buffer unless the response says no-transform
    (agentrove#869), as Ollama's NDJSON lines too."""
    client, _ = stack
    response = await client.post(path, headers={**AUTH, "anthropic-version": "2023-06-01"}, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    assert await response.read()
    assert response.headers["X-Accel-Buffering"] == "no"
    directives = {d.strip() for d in response.headers["Cache-Control"].split(",")}
    assert {"no-cache", "no-transform"} <= directives
