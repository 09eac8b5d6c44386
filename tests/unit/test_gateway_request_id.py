"""vLLM's response id: chatcmpl- / cmpl- and the client's X-Request-Id header or request_id (fake scheduler)."""
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
async def test_without_one_the_id_is_our_own(stack, path, body, prefix):
    client, _ = stack
    first, second = [orjson.loads(await (await client.post(path, data=orjson.dumps({**body, "max_tokens": 2}))).read())
                     ["id"] for _ in range(2)]
    assert first.startswith(f"{prefix}-") and second.startswith(f"{prefix}-") and first != second
