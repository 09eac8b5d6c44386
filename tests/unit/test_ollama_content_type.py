"""Ollama answers JSON through gin's c.JSON, whose Content-Type is "application/json; charset=utf-8" (the header its
route tests assert, server/routes_test.go TestRoutes), its errors and non-streamed generations included; a stream
stays NDJSON."""
import pytest

OLLAMA_JSON = "application/json; charset=utf-8"
HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/api/version", None), ("GET", "/api/tags", None), ("GET", "/api/ps", None),
    ("POST", "/api/show", {"model": "fake-model"}),
    ("POST", "/api/chat", {"model": "fake-model", "messages": HI, "stream": False}),
    ("POST", "/api/generate", {"model": "fake-model", "prompt": "hi", "stream": False}),
    ("POST", "/api/chat", {"model": "nope", "messages": HI}),
    ("POST", "/api/generate", {"model": "fake-model", "prompt": "hi", "raw": "yes"}),
    ("POST", "/api/embed", {"model": "fake-model", "input": "hi"}),
    ("POST", "/api/nothing", {}),
    ("GET", "/api/chat", None),
], ids=["version", "tags", "ps", "show", "chat", "generate", "404", "400", "501", "no route", "405"])
async def test_ollama_json_is_utf8_json(stack, method, path, body):
    client, _ = stack
    response = await client.request(method, path, json=body)
    assert response.headers["Content-Type"] == OLLAMA_JSON
    assert isinstance(await response.json(), dict)


async def test_a_stream_stays_ndjson(stack):
    client, _ = stack
    response = await client.post("/api/chat", json={"model": "fake-model", "messages": HI})
    assert response.headers["Content-Type"] == "application/x-ndjson"
    await response.read()


async def test_openai_routes_keep_plain_json(stack):
    client, _ = stack
    response = await client.get("/v1/models")
    assert response.headers["Content-Type"] == "application/json"
