"""POST /v1/responses/compact (OpenAI's compaction endpoint, the SDK's client.responses.compact) is a 501 that says
compaction is not supported and what to do instead, with x-should-retry: false so the OpenAI SDKs do not retry it.
It matched /v1/responses/{response_id} and was a 405 'method POST not allowed on /v1/responses/compact; use DELETE,
GET, HEAD', which sent the client to routes that find nothing here."""
import orjson
import pytest


@pytest.mark.parametrize("path", ["/v1/responses/compact", "/responses/compact"])
async def test_compaction_is_a_501_that_says_so(stack, path):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({"model": "fake-model", "input": "hi"}))
    body = orjson.loads(await response.read())
    assert (response.status, response.headers["x-should-retry"]) == (501, "false")
    assert body["error"]["type"] == "not_implemented" and body["error"]["code"] == "not_supported"
    assert body["error"]["message"].startswith("response compaction (POST /v1/responses/compact) is not supported")
    assert "Allow" not in response.headers and fake.script.requests == []


async def test_an_unknown_model_is_the_404(stack):
    client, _ = stack
    response = await client.post("/v1/responses/compact", data=orjson.dumps({"model": "gpt-5", "input": "hi"}))
    body = orjson.loads(await response.read())
    assert (response.status, body["error"]["type"]) == (404, "not_found_error")


async def test_a_response_id_route_still_finds_nothing(stack):
    client, _ = stack
    response = await client.get("/v1/responses/compact")
    assert response.status == 404
