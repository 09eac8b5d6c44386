"""Gateway: min_tokens on /v1/chat/completions, /v1/completions and /api/v0 (fake scheduler over loopback gRPC)."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TOKENIZER = build_tokenizer()
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=2048)
    async with fake_gateway(fake) as pair:
        yield pair


async def post(client, path, body):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 8}),
    ("/v1/completions", {"prompt": "Hello", "max_tokens": 8}),
    ("/api/v0/chat/completions", {"messages": USER, "max_tokens": 8}),
    ("/api/v0/completions", {"prompt": "Hello", "max_tokens": 8}),
])
async def test_min_tokens_reaches_the_scheduler(stack, path, body):
    client, fake = stack
    status, _ = await post(client, path, {**body, "min_tokens": 5})
    assert status == 200
    assert fake.script.requests[-1].sampling.min_tokens == 5
    status, _ = await post(client, path, body)
    assert status == 200 and fake.script.requests[-1].sampling.min_tokens == 0


@pytest.mark.parametrize("path, body, limit", [
    # No max_tokens on /v1/completions: OpenAI's default of 16, null too (vLLM #45491); n_predict -1 (llama.cpp's no
    # limit): the room the context leaves (2048 - 2).
    ("/v1/completions", {"prompt": "hi", "min_tokens": 40}, 16),
    ("/v1/completions", {"prompt": "hi", "min_tokens": 10000, "max_tokens": None}, 16),
    ("/v1/chat/completions", {"messages": USER, "min_tokens": 10000}, 2036),
    ("/api/v0/completions", {"prompt": "hi", "min_tokens": 10000, "max_tokens": None}, 2046),
], ids=["default", "null", "chat", "lmstudio"])
async def test_min_tokens_above_an_implicit_limit_is_a_400(stack, path, body, limit):
    """vLLM checks min_tokens against the max_tokens it resolved (SamplingParams: 'min_tokens must be less than or
    equal to max_tokens=N, got M.'); it was capped to that limit and the request ran to the context's end."""
    client, fake = stack
    status, answer = await post(client, path, body)
    assert status == 400 and answer == {"error": {
        "message": f"min_tokens must be less than or equal to max_tokens={limit}, got {body['min_tokens']}.",
        "type": "invalid_request_error", "param": "min_tokens", "code": "invalid_value"}}
    assert fake.script.requests == []


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "min_tokens": -1}),
    ("/v1/chat/completions", {"messages": USER, "min_tokens": 1.5}),
    ("/v1/chat/completions", {"messages": USER, "min_tokens": "three"}),
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 4, "min_tokens": 5}),
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 50, "max_completion_tokens": 4, "min_tokens": 5}),
    ("/v1/completions", {"prompt": "Hello", "max_tokens": 4, "min_tokens": 5}),
    ("/v1/completions", {"prompt": "Hello", "min_tokens": -2}),
    ("/api/v0/chat/completions", {"messages": USER, "max_tokens": 2, "min_tokens": 3}),
])
async def test_bad_min_tokens_is_a_400_naming_the_field(stack, path, body):
    client, fake = stack
    status, answer = await post(client, path, body)
    assert status == 400 and answer["error"]["param"] == "min_tokens", answer
    assert fake.script.requests == []


async def test_stop_strings_apply_only_from_min_tokens_on(stack):
    client, fake = stack
    fake.script.token_ids = [TOKENIZER.token_to_id(t) for t in ("A", "B", "A", "B", "A", "B", "C")]
    body = {"prompt": "Hello", "max_tokens": 7, "stop": ["B"], "temperature": 0}
    status, answer = await post(client, "/v1/completions", body)
    assert status == 200 and answer["choices"][0]["text"] == "A"
    status, answer = await post(client, "/v1/completions", {**body, "min_tokens": 3})
    # Tokens 1 and 2 ("A", "B") come before min_tokens; the "B" of token 4 is the first that stops.
    assert answer["choices"][0]["text"] == "ABA" and answer["choices"][0]["finish_reason"] == "stop"
    status, answer = await post(client, "/v1/completions", {**body, "min_tokens": 6, "stop": ["B", "C"]})
    assert answer["choices"][0]["text"] == "ABABAB" and answer["choices"][0]["finish_reason"] == "stop"
    # With min_tokens 7 no token after the first seven is left: vLLM checks stop strings only once
    # len(output_token_ids) > min_tokens (vllm/v1/engine/detokenizer.py), so the answer runs to max_tokens.
    status, answer = await post(client, "/v1/completions", {**body, "min_tokens": 7, "stop": ["B", "C"]})
    assert answer["choices"][0]["text"] == "ABABABC" and answer["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_stop_string_that_ends_after_min_tokens_is_caught(stack, stream):
    client, fake = stack
    # "AB" starts at token 2 (within min_tokens 2) and ends at token 3: vLLM looks back over the held text and stops.
    fake.script.token_ids = [TOKENIZER.token_to_id(t) for t in ("C", "A", "B", "C", "C")]
    body = {"prompt": "Hello", "max_tokens": 5, "stop": ["AB"], "min_tokens": 2, "stream": stream}
    text, finish = await completion_text(client, body)
    assert (text, finish) == ("C", "stop")
    # A stop string that ends before min_tokens does not count; the next one, ending after, does.
    fake.script.token_ids = [TOKENIZER.token_to_id(t) for t in ("A", "B", "C", "A", "B", "C")]
    text, finish = await completion_text(client, {**body, "max_tokens": 6, "min_tokens": 3})
    assert (text, finish) == ("ABC", "stop")


async def completion_text(client, body) -> tuple:
    """(text, finish_reason) of choice 0 of a /v1/completions call, streamed or not."""
    response = await client.post("/v1/completions", data=orjson.dumps(body))
    assert response.status == 200
    if not body.get("stream"):
        choice = orjson.loads(await response.read())["choices"][0]
        return choice["text"], choice["finish_reason"]
    events = [line[6:] for line in (await response.text()).split("\n\n") if line.startswith("data: {")]
    chunks = [orjson.loads(e)["choices"][0] for e in events]
    return "".join(c["text"] for c in chunks), chunks[-1]["finish_reason"]
