"""SPARKINFER_API_KEY holding several keys, comma-separated: any one of them is accepted, on every route that checks
the key and in each header that route reads, as llama-server's --api-key takes a comma-separated list (common/arg.cpp)
and vLLM's --api-key a list of keys. "alpha,beta" was one key: neither alpha nor beta got in (fake scheduler)."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

KEYS = "alpha, beta"
CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}
ANTHROPIC = {"model": "fake-model", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("key", ["alpha", "beta"])
async def test_each_listed_key_gets_in_on_every_api(key):
    async with fake_gateway(FakeServing(build_tokenizer()), api_key=KEYS) as (client, fake):
        bearer = {"Authorization": f"Bearer {key}"}
        chat = await client.post("/v1/chat/completions", json=CHAT, headers=bearer)
        assert chat.status == 200 and (await chat.json())["object"] == "chat.completion"
        models = await client.get("/v1/models", headers=bearer)
        assert models.status == 200 and (await models.json())["data"]
        messages = await client.post("/v1/messages", json=ANTHROPIC, headers={"x-api-key": key})
        assert messages.status == 200 and (await messages.json())["type"] == "message"
        completion = await client.post("/completion", json={"prompt": "hi", "n_predict": 16},
                                       headers={"x-api-key": key})
        assert completion.status == 200 and (await completion.json())["stop"] is True
        assert len(fake.script.requests) == 3


@pytest.mark.parametrize("key", ["alpha,beta", "alpha, beta", "gamma", "", " "],
                         ids=["whole-list", "whole-list-spaced", "other", "empty", "blank"])
async def test_anything_else_is_the_401(key):
    async with fake_gateway(FakeServing(build_tokenizer()), api_key=KEYS) as (client, fake):
        response = await client.post("/v1/chat/completions", json=CHAT, headers={"Authorization": f"Bearer {key}"})
        assert response.status == 401
        assert (await response.json())["error"]["code"] == "invalid_api_key"
        assert not fake.script.requests


@pytest.mark.parametrize("path, body", [("/v1/messages", ANTHROPIC), ("/v1/messages/count_tokens", ANTHROPIC)])
async def test_anthropic_routes_take_the_key_in_either_header_claude_code_sends(path, body):
    """Claude Code sends both Authorization: Bearer (ANTHROPIC_AUTH_TOKEN) and x-api-key (ANTHROPIC_API_KEY), as its
    request dump in SaladDay/cc-switch-cli#169 shows, and setup guides fill ANTHROPIC_AUTH_TOKEN with a placeholder to
    skip its login (BlockRunAI/Franklin#2, guyskk/claude-code-config-switcher#4): the right key in x-api-key beside a
    placeholder Bearer token was a 401. Either header holding a listed key gets in; neither is still the 401."""
    async with fake_gateway(FakeServing(build_tokenizer()), api_key=KEYS) as (client, fake):
        for bearer, x_api_key in (("placeholder", "beta"), ("alpha", "placeholder")):
            headers = {"Authorization": f"Bearer {bearer}", "x-api-key": x_api_key, "anthropic-version": "2023-06-01"}
            response = await client.post(path, json=body, headers=headers)
            answer = await response.json()
            assert response.status == 200, answer
            assert answer["type"] == "message" if path == "/v1/messages" else answer["input_tokens"] > 0
        headers = {"Authorization": "Bearer placeholder", "x-api-key": "other", "anthropic-version": "2023-06-01"}
        response = await client.post(path, json=body, headers=headers)
        assert response.status == 401 and (await response.json())["error"]["type"] == "authentication_error"
        # The OpenAI routes still read the Bearer token alone, as vLLM does.
        response = await client.post("/v1/chat/completions", json=CHAT,
                                     headers={"Authorization": "Bearer placeholder", "x-api-key": "beta"})
        assert response.status == 401
        assert len(fake.script.requests) == (2 if path == "/v1/messages" else 0)
