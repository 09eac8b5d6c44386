"""Gateway: up to 1024 stop strings on every API (vLLM, Ollama and llama.cpp set no limit; Continue's autocomplete
sends more than 16, which was a 400 once, and SillyTavern sends a group chat's names besides its user's list: 64 was
the next cap), 1025 is a 400 in the route's own shape; fake scheduler."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

STOPS = [f"<stop{i}>" for i in range(1024)]


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    fake.script.reply = "Hello world <stop1023> and more"
    async with fake_gateway(fake) as pair:
        yield pair


ROUTES = {
    "chat": ("/v1/chat/completions", lambda stops: {"messages": [{"role": "user", "content": "hi"}], "stop": stops,
                                                    "enable_thinking": False}),
    "completions": ("/v1/completions", lambda stops: {"prompt": "hi", "stop": stops}),
    "lmstudio": ("/api/v0/completions", lambda stops: {"prompt": "hi", "stop": stops}),
    "ollama": ("/api/generate", lambda stops: {"model": "fake-model", "prompt": "hi", "stream": False, "think": False,
                                               "options": {"stop": stops}}),
    "anthropic": ("/v1/messages", lambda stops: {"model": "fake-model", "max_tokens": 50, "stop_sequences": stops,
                                                 "thinking": {"type": "disabled"},
                                                 "messages": [{"role": "user", "content": "hi"}]}),
}


def _text(route: str, body: dict) -> str:
    if route == "chat":
        return body["choices"][0]["message"]["content"]
    if route in ("completions", "lmstudio"):
        return body["choices"][0]["text"]
    if route == "ollama":
        return body["response"]
    return body["content"][0]["text"]


@pytest.mark.parametrize("route", list(ROUTES))
async def test_1024_stop_strings_are_served_and_the_last_one_stops(stack, route):
    client, fake = stack
    path, body = ROUTES[route]
    response = await client.post(path, data=orjson.dumps(body(STOPS)))
    got = orjson.loads(await response.read())
    assert response.status == 200, got
    assert _text(route, got) == "Hello world "


@pytest.mark.parametrize("route", list(ROUTES))
async def test_1025_stop_strings_are_a_400_in_the_route_shape(stack, route):
    client, fake = stack
    path, body = ROUTES[route]
    response = await client.post(path, data=orjson.dumps(body(STOPS + ["<stop1024>"])))
    got = orjson.loads(await response.read())
    assert response.status == 400
    message = got["error"] if route == "ollama" else got["error"]["message"]
    assert "1024" in message and fake.script.requests == []
