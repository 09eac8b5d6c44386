"""llama-server's own routes with an API key set take the key as llama-server reads it (fake scheduler):
tools/server/server-http.cpp middleware_validate_api_key reads the Authorization header, its "Bearer " prefix dropped
if there, else X-Api-Key. A bare `Authorization: <key>` or `x-api-key: <key>` to /completion was a 401 here; the /v1
routes keep vLLM's Bearer check (tests/unit/test_anthropic_errors.py)."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

KEY = "sekret"
COMPLETION = {"prompt": "hi", "n_predict": 2}


@pytest.mark.parametrize("headers", [{"Authorization": f"Bearer {KEY}"}, {"Authorization": f"bearer {KEY}"},
                                     {"Authorization": KEY}, {"x-api-key": KEY}, {"X-Api-Key": KEY}],
                         ids=["bearer", "lowercase-bearer", "bare", "x-api-key", "X-Api-Key"])
async def test_llama_server_routes_take_the_key_as_llama_server_reads_it(headers):
    async with fake_gateway(FakeServing(build_tokenizer()), api_key=KEY) as (client, fake):
        fake.script.reply = "Hello world"
        response = await client.post("/completion", json=COMPLETION, headers=headers)
        assert response.status == 200, await response.text()
        assert (await response.json())["content"]
        props = await client.get("/props", headers=headers)
        assert props.status == 200 and "default_generation_settings" in await props.json()


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"x-api-key": "wrong"},
                                     {"Authorization": "Basic c2Vrcmv0"}, {"Authorization": "wrong", "x-api-key": KEY}],
                         ids=["none", "wrong-bearer", "wrong-x-api-key", "basic", "authorization-first"])
async def test_a_missing_or_wrong_key_is_llama_servers_401(headers):
    """As llama-server: Authorization, when sent, is the key read (x-api-key is read only without it)."""
    async with fake_gateway(FakeServing(build_tokenizer()), api_key=KEY) as (client, fake):
        response = await client.post("/completion", json=COMPLETION, headers=headers)
        assert response.status == 401
        assert await response.json() == {"error": {
            "code": 401, "type": "authentication_error",
            "message": "missing or invalid API key: send 'x-api-key: <key>' or 'Authorization: Bearer <key>'"}}
        assert not fake.script.requests


async def test_the_v1_routes_keep_the_bearer_check():
    async with fake_gateway(FakeServing(build_tokenizer()), api_key=KEY) as (client, _):
        for headers in ({"Authorization": KEY}, {"x-api-key": KEY}):
            response = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2}, headers=headers)
            assert response.status == 401
