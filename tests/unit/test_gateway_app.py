"""The gateway's aiohttp app against a scripted in-process Serving servicer (loopback gRPC, no model); overload,
status mapping and aborts: test_gateway_app_errors.py."""
import asyncio

import orjson
import pytest

from gateway.app import create_app
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway, start_fake_server, start_test_client
from tests.unit.tool_deltas import chunk_calls

TOKENIZER = build_tokenizer()
USER = [{"role": "user", "content": "hi"}]
REPLY = "<think>plan</think>\n\nHello 日本語 🎉 world"


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=2048)
    async with fake_gateway(fake, sse_keepalive_s=0.2) as pair:
        yield pair


def events(raw: bytes) -> list:
    """SSE data payloads (JSON objects, or the literal [DONE]); comments are skipped."""
    out = []
    for block in raw.decode("utf-8", errors="strict").split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: "):]
            out.append(data if data == "[DONE]" else orjson.loads(data))
    return out


async def post(client, path, body):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, await response.read(), response


def error_of(raw: bytes) -> dict:
    body = orjson.loads(raw)
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


async def test_models_health_version_metrics(stack):
    client, _ = stack
    status, raw, _ = await post(client, "/v1/tokenize", {"prompt": "Hello world"})
    assert status == 200 and orjson.loads(raw)["count"] == len(TOKENIZER.encode("Hello world").ids)
    models = await (await client.get("/v1/models")).json()
    assert models["object"] == "list" and models["data"][0]["id"] == "fake-model"
    assert models["data"][0]["max_model_len"] == 2048
    missing = await client.get("/v1/models/gpt-4")
    assert missing.status == 404 and error_of(await missing.read())["code"] == "model_not_found"
    assert (await (await client.get("/health")).json())["status"] == "ok"
    assert (await (await client.get("/version")).json())["name"] == "sparkinfer"
    exposition = await (await client.get("/metrics")).read()
    assert b"sparkinfer_gateway_http_requests_total" in exposition
    # As vLLM: no _created series beside the counters and histograms.
    assert b"sparkinfer_gateway_http_requests_total{" in exposition and b"_created" not in exposition


async def test_chat_stream_equals_non_stream_and_usage_is_exact(stack):
    client, fake = stack
    fake.script.reply = REPLY
    body = {"model": "default", "messages": USER, "temperature": 0}
    status, raw, _ = await post(client, "/v1/chat/completions", body)
    assert status == 200
    full = orjson.loads(raw)
    message = full["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Hello 日本語 🎉 world", "refusal": None,
                       "reasoning_content": "plan", "reasoning": "plan"}
    num_prompt = len(fake.script.requests[-1].prompt_token_ids)
    num_reply = len(TOKENIZER.encode(REPLY).ids)
    assert full["usage"] == {"prompt_tokens": num_prompt, "completion_tokens": num_reply + 1,
                             "total_tokens": num_prompt + num_reply + 1, "prompt_tokens_details": {"cached_tokens": 0},
                             "completion_tokens_details": {"reasoning_tokens": len(TOKENIZER.encode("plan").ids)}}
    status, raw, response = await post(client, "/v1/chat/completions",
                                       {**body, "stream": True, "stream_options": {"include_usage": True}})
    assert status == 200 and response.headers["Content-Type"].startswith("text/event-stream")
    chunks = events(raw)
    assert chunks[-1] == "[DONE]"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    with_usage = [c for c in chunks[:-1] if c.get("usage") is not None]
    assert with_usage == [chunks[-2]] and chunks[-2]["choices"] == [] and chunks[-2]["usage"] == full["usage"]
    deltas = [c["choices"][0]["delta"] for c in chunks[1:-2]]
    assert "".join(d.get("content", "") for d in deltas) == message["content"]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "plan"
    assert chunks[-3]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop",
                                        "stop_reason": None}
    assert all("\ufffd" not in d.get("content", "") for d in deltas)


async def test_no_usage_anywhere_unless_asked(stack):
    client, _ = stack
    status, raw, _ = await post(client, "/v1/completions", {"prompt": "hi", "stream": True, "max_tokens": 1})
    chunks = events(raw)
    assert status == 200 and all("usage" not in c for c in chunks[:-1])
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"


async def test_stop_string_spanning_tokens_stream_and_not(stack):
    client, fake = stack
    fake.script.reply = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12"
    body = {"prompt": "Count:", "max_tokens": 40, "stop": [" 9, 10"], "temperature": 0}
    status, raw, _ = await post(client, "/v1/completions", body)
    choice = orjson.loads(raw)["choices"][0]
    assert status == 200 and choice["text"] == "1, 2, 3, 4, 5, 6, 7, 8," and choice["finish_reason"] == "stop"
    status, raw, _ = await post(client, "/v1/completions", {**body, "stream": True})
    chunks = events(raw)[:-1]
    texts = [c["choices"][0]["text"] for c in chunks]
    assert "".join(texts) == choice["text"] and chunks[-1]["choices"][0]["finish_reason"] == "stop"
    await asyncio.sleep(0.1)
    assert fake.num_running == 0


async def test_n_choices_and_usage_sum(stack):
    client, fake = stack
    fake.script.reply = "Hello world"
    status, raw, _ = await post(client, "/v1/completions", {"prompt": "hi", "n": 2, "max_tokens": 8, "seed": 5})
    body = orjson.loads(raw)
    assert [c["index"] for c in body["choices"]] == [0, 1]
    assert body["usage"]["completion_tokens"] == 2 * (len(TOKENIZER.encode("Hello world").ids) + 1)
    assert body["usage"]["prompt_tokens"] == len(TOKENIZER.encode("hi").ids)
    assert [r.sampling.seed for r in fake.script.requests[-2:]] in ([5, 6], [6, 5])


async def test_keepalive_comments_on_a_silent_stream(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = "Hi", 0.5
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": "x", "stream": True}))
    raw = await response.read()
    assert b": keep-alive\n\n" in raw and events(raw)[-1] == "[DONE]"


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CALL = ("<think>need data</think>\n\nChecking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n</function>\n</tool_call>")


async def test_tool_calls_non_stream_and_stream(stack):
    client, fake = stack
    fake.script.reply = CALL
    body = {"messages": USER, "tools": TOOLS}
    status, raw, _ = await post(client, "/v1/chat/completions", body)
    choice = orjson.loads(raw)["choices"][0]
    assert status == 200 and choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Checking."
    call = choice["message"]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert "get_weather" in TOKENIZER.decode(fake.script.requests[-1].prompt_token_ids)
    status, raw, _ = await post(client, "/v1/chat/completions", {**body, "stream": True})
    chunks = events(raw)[:-1]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("content") or "" for d in deltas) == "Checking."
    assert {call["index"] for d in deltas for call in d.get("tool_calls") or []} == {0}
    assert [c["function"] for c in chunk_calls(chunks)] == [{"name": "get_weather", "arguments": '{"city":"Paris"}'}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_echo_with_zero_max_tokens_returns_prompt_and_server_lives(stack):
    client, fake = stack
    before = len(fake.script.requests)
    body = {"prompt": "Question: Is the sky blue? Answer: Yes", "max_tokens": 0, "echo": True}
    status, raw, _ = await post(client, "/v1/completions", body)
    result = orjson.loads(raw)
    assert status == 200 and result["choices"][0]["text"] == body["prompt"]
    assert result["choices"][0]["finish_reason"] == "length"
    assert result["usage"]["completion_tokens"] == 0 and result["usage"]["prompt_tokens"] > 0
    assert len(fake.script.requests) == before
    status, raw, _ = await post(client, "/v1/completions", {**body, "stream": True})
    chunks = events(raw)
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1]) == body["prompt"]
    status, _, _ = await post(client, "/v1/completions", {"prompt": "hi", "max_tokens": 8})
    assert status == 200


async def test_logprobs_shapes(stack):
    client, fake = stack
    fake.script.reply = "Hello world"
    status, raw, _ = await post(client, "/v1/chat/completions", {"messages": USER, "logprobs": True,
                                                                 "enable_thinking": False})
    content = orjson.loads(raw)["choices"][0]["logprobs"]["content"]
    assert status == 200 and "".join(e["token"] for e in content[:-1]) == "Hello world"
    assert content[0]["logprob"] == -0.5 and content[0]["top_logprobs"] == []
    assert bytes(content[0]["bytes"]).decode() == content[0]["token"]
    # The eos that ended it has its entry too (vLLM), though not in the text.
    assert content[-1] == {"token": "<|im_end|>", "logprob": -0.25, "bytes": list(b"<|im_end|>"), "top_logprobs": []}
    status, raw, _ = await post(client, "/v1/completions", {"prompt": "hi", "logprobs": 0})
    logprobs = orjson.loads(raw)["choices"][0]["logprobs"]
    assert "".join(logprobs["tokens"][:-1]) == "Hello world" and logprobs["text_offset"][0] == 0
    assert (logprobs["tokens"][-1], logprobs["token_logprobs"][-1]) == ("<|im_end|>", -0.25)


@pytest.mark.parametrize("path,data,status,code", [
    ("/v1/chat/completions", b"{not json", 400, "invalid_json"),
    ("/v1/chat/completions", b"", 400, "invalid_json"),
    ("/v1/chat/completions", b"[1]", 400, "invalid_type"),
    ("/v1/nope", b"{}", 404, "not_found"),
], ids=["malformed", "empty", "array", "unknown-route"])
async def test_bad_bodies_and_routes(stack, path, data, status, code):
    client, _ = stack
    response = await client.post(path, data=data)
    assert response.status == status and error_of(await response.read())["code"] == code


async def test_wrong_method_is_405_shaped(stack):
    client, _ = stack
    response = await client.get("/v1/chat/completions")
    assert response.status == 405 and error_of(await response.read())["code"] == "method_not_allowed"


async def test_api_key_is_enforced_on_v1_only():
    fake = FakeServing(TOKENIZER)
    server, addr = await start_fake_server(fake)
    config = GatewayConfig(scheduler_addr=addr, api_key="s3cret")
    client = await start_test_client(create_app(config, SchedulerClient(addr)))
    try:
        denied = await client.get("/v1/models")
        assert denied.status == 401 and error_of(await denied.read())["type"] == "authentication_error"
        allowed = await client.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
        assert allowed.status == 200 and (await client.get("/health")).status == 200
    finally:
        await client.close()
        await server.stop(None)


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 2}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
    ("/api/v0/chat/completions", {"messages": USER, "max_tokens": 2}),
])
async def test_an_empty_model_name_means_the_served_model(stack, path, body):
    """Some clients send "model": "" (vLLM's _is_model_supported accepts it); only a wrong name is a 404."""
    client, _ = stack
    status, raw, _ = await post(client, path, {**body, "model": ""})
    assert status == 200 and orjson.loads(raw)["model"] == "fake-model"
