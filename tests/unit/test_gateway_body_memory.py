"""Gateway: a request's body is not kept once it is answered, while its keep-alive connection waits for the next one
(fake scheduler)."""
import gc
import tracemalloc

import pytest

from tests.unit.test_gateway_body import LIMIT, ROUTES, _error, client  # noqa: F401 (client: its fixture)

BODY_MIB = 4


def _largest_live_blocks() -> list:
    """Sizes of the live allocations of at least 1 MiB."""
    gc.collect()
    stats = tracemalloc.take_snapshot().statistics("traceback")
    return sorted((stat.size for stat in stats if stat.size >= 1 << 20 and stat.count == 1), reverse=True)


@pytest.mark.parametrize("path", list(ROUTES), ids=[path.strip("/").replace("/", "-") for path in ROUTES])
async def test_an_answered_body_is_not_held_by_its_idle_keep_alive_connection(stack, path):
    """aiohttp's connection loop (web_protocol.RequestHandler.start) keeps the last request until the connection's
    next request or its keep-alive timeout (75 s), and request.read() keeps the body on the request: each idle
    keep-alive client (OpenAI's and Ollama's clients pool their connections) pinned its last body, up to 32 MiB."""
    client, _ = stack
    body = dict(ROUTES[path], padding="x" * (BODY_MIB << 20))
    tracemalloc.start()
    try:
        response = await client.post(path, json=body)
        answer = await response.json()
        del body
        held = _largest_live_blocks()
    finally:
        tracemalloc.stop()
    assert response.status == 200, answer
    assert response.headers.get("Connection", "keep-alive").lower() != "close"
    assert not [size for size in held if size >= BODY_MIB << 20], held


async def test_a_chunked_body_past_the_limit_is_413_and_the_connection_serves_on(client):
    """A body with no Content-Length is counted as it arrives: past the limit, the 413 request.read() answered."""
    async def chunks():
        for _ in range(LIMIT // 65536 + 2):
            yield b" " * 65536

    response = await client.post("/v1/completions", data=chunks(), headers={"Content-Type": "application/json"})
    message = _error("/v1/completions", await response.read())
    assert response.status == 413, message
    assert message == f"request body too large: Maximum request body size {LIMIT} exceeded."
    response = await client.post("/v1/completions", json=ROUTES["/v1/completions"])
    assert response.status == 200 and (await response.json())["choices"][0]["text"] == "Hi"
