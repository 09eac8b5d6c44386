"""vLLM's response id: chatcmpl- / cmpl- and the client's X-Request-Id header or request_id (fake scheduler)."""
import asyncio

import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
ROUTES = [("/v1/chat/completions", {"messages": USER}, "chatcmpl"), ("/v1/completions", {"prompt": "hi"}, "cmpl")]


def ids(raw: bytes) -> set:
    return {orjson.loads(block[6:])["id"] for block in raw.decode().split("\n\n") if block.startswith("data: {")}


@pytest.mark.parametrize("path, body, prefix", ROUTES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("header, field, expected", [
    ("trace-7", None, "trace-7"), (None, "req-42", "req-42"), ("trace-7", "req-42", "trace-7")],
    ids=["header", "request_id", "header-wins"])
async def test_the_response_id_names_the_clients_request_id(stack, path, body, prefix, stream, header, field,
                                                            expected):
    # vLLM: request_id = f"chatcmpl-{self._base_request_id(raw_request, request.request_id)}" (the X-Request-Id header,
    # else the body's request_id; cmpl- on completions), the id of the answer and of every chunk.
    client, _ = stack
    headers = {"X-Request-Id": header} if header else {}
    extra = {"request_id": field} if field else {}
    response = await client.post(path, data=orjson.dumps({**body, **extra, "max_tokens": 3, "stream": stream}),
                                 headers=headers)
    raw = await response.read()
    assert response.status == 200
    assert (ids(raw) if stream else {orjson.loads(raw)["id"]}) == {f"{prefix}-{expected}"}


@pytest.mark.parametrize("path, body, prefix", ROUTES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("header, fields, expected", [
    (None, {"rid": "sg-1"}, "sg-1"), ("trace-7", {"rid": "sg-1"}, "{prefix}-trace-7"),
    (None, {"rid": "sg-1", "request_id": "req-42"}, "{prefix}-req-42")],
    ids=["rid", "header-wins", "request_id-wins"])
async def test_sglang_rid_is_the_id_itself(stack, path, body, prefix, stream, header, fields, expected):
    # SGLang answers with its rid as the id (meta_info id = the request's rid), no prefix; vLLM's two come first.
    client, _ = stack
    headers = {"X-Request-Id": header} if header else {}
    response = await client.post(path, data=orjson.dumps({**body, **fields, "max_tokens": 3, "stream": stream}),
                                 headers=headers)
    raw = await response.read()
    assert response.status == 200
    assert (ids(raw) if stream else {orjson.loads(raw)["id"]}) == {expected.format(prefix=prefix)}


@pytest.mark.parametrize("path, body, prefix", ROUTES)
async def test_without_one_the_id_is_our_own(stack, path, body, prefix):
    client, _ = stack
    first, second = [orjson.loads(await (await client.post(path, data=orjson.dumps({**body, "max_tokens": 2}))).read())
                     ["id"] for _ in range(2)]
    assert first.startswith(f"{prefix}-") and second.startswith(f"{prefix}-") and first != second


async def _raw_post(port: int, path: str, body: dict, header: bytes) -> tuple[bytes, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = orjson.dumps(body)
    writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\n".encode() + b"X-Request-Id: " + header + b"\r\n\r\n" + data)
    try:
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], rest


@pytest.mark.parametrize("path, body, prefix", ROUTES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_request_id_that_is_not_utf8_is_read_as_latin1(stack, path, body, prefix, stream):
    # A header's bytes that are not UTF-8 (ab\xffc) were kept as a lone surrogate, which the answer's JSON could not
    # encode: a 500 "internal error: UnicodeEncodeError" (streamed: an error event for every chunk). Starlette, under
    # vLLM, reads every header as Latin-1, so vLLM answers chatcmpl-abÿc.
    client, _ = stack
    status, rest = await _raw_post(client.server.port, path, {**body, "max_tokens": 3, "stream": stream}, b"ab\xffc")
    assert status == b"HTTP/1.1 200 OK"
    if stream:
        # chunked framing around SSE events (one chunk may carry several: 2e72557 writes queued events at once): the
        # events are the lines that start with data:
        events = [line[6:].rstrip(b"\r") for line in rest.split(b"\n") if line.startswith(b"data: ")]
        found = {orjson.loads(e)["id"] for e in events if e.startswith(b"{")}
        assert b"error" not in rest and found == {f"{prefix}-ab\u00ffc"}
    else:
        assert orjson.loads(rest)["id"] == f"{prefix}-ab\u00ffc"


@pytest.mark.parametrize("path, body, prefix", ROUTES)
async def test_a_utf8_request_id_keeps_its_characters(stack, path, body, prefix):
    client, _ = stack
    status, rest = await _raw_post(client.server.port, path, {**body, "max_tokens": 3}, "é漢".encode())
    assert status == b"HTTP/1.1 200 OK" and orjson.loads(rest)["id"] == f"{prefix}-é漢"
