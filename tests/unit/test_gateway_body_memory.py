"""Gateway: nothing of a request's body is kept once it is answered: not by its idle keep-alive connection, not by the
chat template's render (fake scheduler)."""
import gc
import tracemalloc

import pytest
from aiohttp import web

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from tests.unit.test_gateway_body import LIMIT, ROUTES, _error, client  # noqa: F401 (client: its fixture)

BODY_MIB = 4
TEXT = "word " * ((BODY_MIB << 20) // 5)
# Every route that renders the chat template, with TEXT as the user's message.
CHAT_ROUTES = {
    "/v1/chat/completions": {"model": "fake-model", "messages": [{"role": "user", "content": TEXT}], "max_tokens": 2},
    "/api/chat": {"model": "fake-model", "messages": [{"role": "user", "content": TEXT}], "stream": False},
    # Streamed: the answer's `context` (every prompt token) is in its last line, not one response body kept with it.
    "/api/generate": {"model": "fake-model", "prompt": TEXT, "stream": True},
    "/v1/messages": {"model": "fake-model", "messages": [{"role": "user", "content": TEXT}], "max_tokens": 2},
    # store false: a stored response's turn is kept on purpose, for previous_response_id (gateway.response_threads).
    "/v1/responses": {"model": "fake-model", "input": TEXT, "max_output_tokens": 2, "store": False},
    "/api/v0/chat/completions": {"model": "fake-model", "messages": [{"role": "user", "content": TEXT}]},
}


def _largest_live_blocks(collect: bool = True) -> list:
    """Sizes of the live allocations of at least 1 MiB (after a full collection, or with what only it would free)."""
    if collect:
        gc.collect()
    # The test client's copy of the answer is not the gateway's.
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, "*/aiohttp/client_reqrep.py",
                                                                             all_frames=True)])
    return sorted((trace.size for trace in snapshot.traces if trace.size >= 1 << 20), reverse=True)


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


@pytest.fixture
async def roomy_stack():
    """The gateway over a fake scheduler whose context holds TEXT."""
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=4 << 20)) as pair:
        yield pair


@pytest.mark.parametrize("path", list(CHAT_ROUTES), ids=[path.strip("/").replace("/", "-") for path in CHAT_ROUTES])
async def test_a_rendered_conversation_is_not_held_until_a_full_collection(roomy_stack, path):
    """jinja2 leaves a reference cycle behind a template that defines a macro (its Context holds the Macro, the
    macro's closure the Context), and the Context held the messages until Python's full collection: a gateway that
    rendered six 28 MiB prompts stayed 340 MB larger long after answering them."""
    client, _ = roomy_stack
    gc.collect()
    gc.disable()
    tracemalloc.start(32)
    try:
        response = await client.post(path, json=CHAT_ROUTES[path])
        answer = await response.text()
        held = _largest_live_blocks(collect=False)
    finally:
        tracemalloc.stop()
        gc.enable()
    assert response.status == 200 and "Hello" in answer, answer[:300]
    assert not [size for size in held if size >= BODY_MIB << 20], held


async def test_an_answer_is_not_held_by_its_idle_keep_alive_connection(roomy_stack):
    """aiohttp's connection loop keeps the last response (web.Response, its body bytes) as it keeps the last request,
    until the connection's next request or its keep-alive timeout: a 5.8 MB /tokenize answer stayed with its idle
    connection (and orjson had reserved 265 MB of address space for it)."""
    client, _ = roomy_stack
    response = await client.post("/tokenize", json={"model": "fake-model", "prompt": TEXT})
    answer = await response.read()
    assert response.status == 200 and len(answer) >= BODY_MIB << 20, answer[:300]
    assert response.headers.get("Connection", "keep-alive").lower() != "close"
    gc.collect()
    held = [len(obj.body) for obj in gc.get_objects()
            if isinstance(obj, web.Response) and isinstance(obj.body, (bytes, bytearray))]
    assert [size for size in held if size >= len(answer)] == []
