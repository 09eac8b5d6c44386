"""The gateway's aiohttp app against a scripted in-process Serving servicer: overload (429 with Retry-After), the
scheduler's gRPC status mapped to HTTP, the scheduler unreachable, aborts mid-stream and client disconnects (the
answers themselves: test_gateway_app.py, whose fixture and helpers these tests share)."""
import asyncio

import grpc
import orjson
import pytest

from gateway.app import create_app
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig
from gateway.fake_scheduler import start_test_client
from tests.unit.test_gateway_app import USER, error_of, events, post, stack  # noqa: F401 - stack: the fixture


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_queue_full_is_429_with_retry_after(stack, stream):
    client, fake = stack
    fake.script.error = grpc.StatusCode.RESOURCE_EXHAUSTED
    status, raw, response = await post(client, "/v1/chat/completions", {"messages": USER, "stream": stream})
    assert status == 429 and response.headers["Retry-After"] == "1"
    assert error_of(raw)["type"] == "rate_limit_error"


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "stream": True, "n": 2}),
    ("/v1/completions", {"prompt": "hi", "stream": True, "n": 2}),
    ("/v1/completions", {"prompt": "hi", "n": 2}),
    ("/api/v0/chat/completions", {"messages": USER, "stream": True, "n": 2}),
], ids=["chat-stream", "completions-stream", "completions", "lmstudio-stream"])
async def test_n_choices_refused_in_part_fail_whole_with_429(stack, path, body):
    """A short queue admits choice 0 and refuses choice 1: the whole request is a 429 before any byte of a body
    (never a 200 stream cut by an error event), and the admitted choice is cancelled."""
    client, fake = stack
    # 50 ms a token: choice 0 is still running when choice 1 arrives, however slowly the box schedules the gateway
    # (with no delay choice 0 could finish first on a loaded machine, and choice 1 would then be admitted: a 200)
    fake.script.reply, fake.script.max_running, fake.script.delay_s = "Hello world " * 20, 1, 0.05
    status, raw, response = await post(client, path, {**body, "max_tokens": 40})
    assert status == 429 and response.headers["Retry-After"] == "1", raw[:300]
    assert error_of(raw)["type"] == "rate_limit_error" and error_of(raw)["code"] == "server_overloaded"
    for _ in range(250):  # up to 5 s: the cancel crosses the fake scheduler's gRPC stream (slow on a loaded CI box)
        if fake.num_running == 0:
            break
        await asyncio.sleep(0.02)
    assert fake.num_running == 0


@pytest.mark.parametrize("code,details,status,error_code", [
    (grpc.StatusCode.UNAVAILABLE, "worker down", 503, "server_unavailable"),
    (grpc.StatusCode.INVALID_ARGUMENT, "prompt does not fit the context", 400, "context_length_exceeded"),
    (grpc.StatusCode.INVALID_ARGUMENT, "bad top_k", 400, "invalid_value"),
    (grpc.StatusCode.DEADLINE_EXCEEDED, "slow", 504, "request_timeout"),
    (grpc.StatusCode.INTERNAL, "bug", 500, "internal_error"),
], ids=["unavailable", "context", "invalid", "deadline", "internal"])
async def test_scheduler_status_maps_to_http(stack, code, details, status, error_code):
    client, fake = stack
    fake.script.error, fake.script.error_details = code, details
    got, raw, _ = await post(client, "/v1/completions", {"prompt": "hi"})
    assert got == status and error_of(raw)["code"] == error_code and details in error_of(raw)["message"]


async def test_scheduler_unreachable_is_503():
    config = GatewayConfig(scheduler_addr="127.0.0.1:1")
    client = await start_test_client(create_app(config, SchedulerClient("127.0.0.1:1")))
    try:
        status, raw, _ = await post(client, "/v1/chat/completions", {"messages": USER})
        assert status == 503 and error_of(raw)["type"] == "server_unavailable"
        assert (await client.get("/health")).status == 503
    finally:
        await client.close()


async def test_abort_mid_stream_sends_error_event_then_done(stack):
    client, fake = stack
    fake.script.reply, fake.script.abort_after = "Hello world " * 5, 3
    status, raw, _ = await post(client, "/v1/completions", {"prompt": "hi", "stream": True, "max_tokens": 20})
    chunks = events(raw)
    assert status == 200 and chunks[-1] == "[DONE]"
    assert chunks[-2]["error"]["code"] == "server_unavailable"


async def test_client_disconnect_cancels_generation(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = "Hello world " * 20, 0.05
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "stream": True,
                                                                      "max_tokens": 100}))
    await response.content.readline()
    assert fake.num_running == 1
    response.close()
    for _ in range(40):
        if fake.num_running == 0:
            break
        await asyncio.sleep(0.05)
    assert fake.num_running == 0
    status, _, _ = await post(client, "/v1/completions", {"prompt": "hi", "max_tokens": 2})
    assert status == 200
