"""X-Request-Id on every response: the client's own, else a fresh id, as vLLM's request-id middleware and OpenAI;
the access log line that names it (fake scheduler)."""
import asyncio
import logging
import re

import orjson
import pytest

from gateway.config import parse_config

USER = [{"role": "user", "content": "hi"}]
REQUESTS = [
    ("/v1/chat/completions", {"model": "fake-model", "messages": USER, "max_tokens": 3}),
    ("/v1/chat/completions", {"model": "fake-model", "messages": USER, "max_tokens": 3, "stream": True}),
    ("/v1/completions", {"model": "fake-model", "prompt": "hi", "max_tokens": 3, "stream": True}),
    ("/v1/responses", {"model": "fake-model", "input": "hi", "max_output_tokens": 16}),
    ("/v1/messages", {"model": "fake-model", "messages": USER, "max_tokens": 3, "stream": True}),
    ("/api/chat", {"model": "fake-model", "messages": USER, "options": {"num_predict": 3}}),
    ("/completion", {"prompt": "hi", "n_predict": 3}),
    ("/v1/chat/completions", {"model": "fake-model", "messages": USER, "temperature": -1}),
]
IDS = ["chat", "chat-stream", "completions-stream", "responses", "messages-stream", "ollama", "llama.cpp",
       "error-400"]


@pytest.mark.parametrize("path, body", REQUESTS, ids=IDS)
async def test_the_clients_request_id_comes_back_in_the_header(stack, path, body):
    client, _ = stack
    response = await client.post(path, data=orjson.dumps(body), headers={"X-Request-Id": "trace-7"})
    raw = await response.read()
    assert response.status == (400 if "temperature" in body else 200), raw
    assert raw and response.headers.get("X-Request-Id") == "trace-7"


@pytest.mark.parametrize("method, path", [("GET", "/health"), ("GET", "/v1/models"), ("GET", "/metrics"),
                                          ("GET", "/nowhere"), ("POST", "/v1/chat/completions")])
async def test_without_one_each_response_gets_its_own(stack, method, path):
    client, _ = stack
    body = orjson.dumps({"model": "fake-model", "messages": USER, "max_tokens": 2})
    given = [(await client.request(method, path, data=body)).headers.get("X-Request-Id") for _ in range(2)]
    assert all(g and re.fullmatch(r"[0-9a-f]{32}", g) for g in given), given
    assert given[0] != given[1]


async def test_a_browser_may_read_it(stack):
    client, _ = stack
    response = await client.get("/v1/models")
    assert "X-Request-Id" in response.headers["Access-Control-Expose-Headers"]


async def test_a_request_the_parser_refused_has_one(stack):
    client, _ = stack
    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: trace-9\r\n"
                 b"Content-Length: nope\r\n\r\n")
    try:
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head = raw.partition(b"\r\n\r\n")[0].decode()
    assert " 400 " in head.split("\r\n")[0] and re.search(r"(?im)^X-Request-Id: \S+", head), head


async def test_the_access_log_names_each_request_by_its_id(stack, caplog):
    client, _ = stack
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    await (await client.post("/v1/chat/completions", headers={"X-Request-Id": "trace-7"}, data=orjson.dumps(
        {"messages": USER, "max_tokens": 3, "stream": True}))).read()
    given = (await client.get("/v1/models")).headers["X-Request-Id"]
    lines = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert any('"POST /v1/chat/completions HTTP/1.1" 200' in line and line.endswith("request_id=trace-7")
               for line in lines), lines
    assert any('"GET /v1/models HTTP/1.1" 200' in line and line.endswith(f"request_id={given}") for line in lines)


@pytest.mark.parametrize("env, logged", [(None, True), ("0", False), ("1", True)])
def test_the_access_log_can_be_turned_off(monkeypatch, env, logged):
    if env is None:
        monkeypatch.delenv("SPARKINFER_ACCESS_LOG", raising=False)
    else:
        monkeypatch.setenv("SPARKINFER_ACCESS_LOG", env)
    assert parse_config([]).access_log is logged
    assert parse_config(["--disable-access-log"]).access_log is False


def test_the_paths_left_out_of_the_access_log_are_read_as_vllm_reads_them(monkeypatch):
    monkeypatch.delenv("SPARKINFER_DISABLE_ACCESS_LOG_FOR_ENDPOINTS", raising=False)
    assert parse_config([]).access_log_excluded_paths == frozenset()
    flag = parse_config(["--disable-access-log-for-endpoints", "/health,/metrics,/ping"])
    assert flag.access_log_excluded_paths == {"/health", "/metrics", "/ping"}
    monkeypatch.setenv("SPARKINFER_DISABLE_ACCESS_LOG_FOR_ENDPOINTS", " /health , ,/metrics")
    assert parse_config([]).access_log_excluded_paths == {"/health", "/metrics"}
