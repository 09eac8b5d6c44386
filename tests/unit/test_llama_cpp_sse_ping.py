"""llama.cpp's sse_ping_interval: "interval in seconds between SSE comment pings emitted while the stream stays silent,
keeping the connection observable during long prompt processing. Overrides the server --sse-ping-interval setting for
this request, -1 disables pings" (tools/server/README.md, POST /completion options). Clients of llama-server set it on
/completion and its OpenAI routes to keep their own idle timeouts and proxies from cutting a long prefill; it was
ignored here (logged as an unknown field), so a stream kept the server's SPARKINFER_SSE_KEEPALIVE_SECONDS period
whatever the request asked, and -1 still got keep-alives."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

PING = ": keep-alive"
ROUTES = [("/completion", {"prompt": "hi", "n_predict": 3}),
          ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}),
          ("/v1/completions", {"prompt": "hi", "max_tokens": 3})]


async def _stream(client, path: str, body: dict) -> str:
    response = await client.post(path, json={**body, "stream": True})
    assert response.status == 200
    return await response.text()


@pytest.mark.parametrize("path,body", ROUTES, ids=[path for path, _ in ROUTES])
async def test_the_requests_interval_sets_the_pings_of_its_stream(path, body):
    fake = FakeServing(build_tokenizer())
    fake.script.reply, fake.script.delay_s = "a b c", 0.4
    async with fake_gateway(fake, sse_keepalive_s=60.0) as (client, _):
        assert PING not in await _stream(client, path, body)    # the server's 60 s: none in a 1.2 s stream
        text = await _stream(client, path, {**body, "sse_ping_interval": 0.1})
    assert text.count(PING) >= 3
    assert "a" in text and text.rstrip().endswith(("}", "[DONE]"))


@pytest.mark.parametrize("path,body", ROUTES, ids=[path for path, _ in ROUTES])
async def test_minus_one_sends_no_pings(path, body):
    fake = FakeServing(build_tokenizer())
    fake.script.reply, fake.script.delay_s = "a b c", 0.3
    async with fake_gateway(fake, sse_keepalive_s=0.1) as (client, _):
        assert PING in await _stream(client, path, body)
        text = await _stream(client, path, {**body, "sse_ping_interval": -1})
    assert PING not in text and "a" in text


async def test_an_interval_as_text_is_read_as_its_number_and_other_text_is_a_400():
    fake = FakeServing(build_tokenizer())
    fake.script.reply, fake.script.delay_s = "a b", 0.3
    async with fake_gateway(fake, sse_keepalive_s=60.0) as (client, _):
        # "0.1" is 0.1, as the /v1 schema reads a number sent as text (pydantic's lax mode)
        assert PING in await _stream(client, "/completion", {"prompt": "hi", "sse_ping_interval": "0.1"})
        response = await client.post("/completion", json={"prompt": "hi", "stream": True, "sse_ping_interval": "soon"})
        assert response.status == 400
        assert (await response.json())["error"]["param"] == "sse_ping_interval"


async def test_a_tiny_interval_is_served_at_the_floor():
    """sse_ping_interval 1e-6 woke the gateway's loop for a ping about every millisecond (~650 in a 1 s stream, 0.14
    CPU s of the loop every stream shares): a request may ask for no shorter a period than MIN_SSE_PING_S."""
    fake = FakeServing(build_tokenizer())
    fake.script.reply, fake.script.delay_s = "a b", 0.5
    async with fake_gateway(fake, sse_keepalive_s=60.0) as (client, _):
        text = await _stream(client, "/completion", {"prompt": "hi", "n_predict": 2, "sse_ping_interval": 1e-6})
    assert 2 <= text.count(PING) <= 15, text.count(PING)
    assert text.rstrip().endswith("}")
