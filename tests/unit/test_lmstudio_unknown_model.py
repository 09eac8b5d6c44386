"""LM Studio's answer to a chat or completion naming a model it does not have: 400 {"error": {"message": 'Invalid
model identifier "o4-mini". Please specify a valid downloaded model (e.g., ...).', "type": "invalid_request_error",
"param": "model", "code": "model_not_found"}}, as its users quote it (assafelovic/gpt-researcher#1556,
continuedev/continue#12757, QwenLM/qwen-code#10065). /api/v0's chat and completions answered vLLM's 404 'The model
... does not exist', so a client telling LM Studio's errors apart by status (400, BadRequestError in the OpenAI SDKs)
got a NotFoundError. GET /api/v0/models/{id} of an unknown id keeps its 404; /v1 keeps vLLM's 404."""
import orjson
import pytest

CALLS = [("/api/v0/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}),
         ("/api/v0/completions", {"prompt": "Hi", "max_tokens": 2})]


async def call(client, method: str, path: str, body=None) -> tuple[int, dict]:
    response = await client.request(method, path, data=None if body is None else orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path, base", CALLS, ids=[path for path, _ in CALLS])
async def test_an_unknown_model_is_lm_studios_invalid_identifier(stack, path, base, stream):
    client, fake = stack
    status, body = await call(client, "POST", path, {**base, "model": "o4-mini", "stream": stream})
    assert status == 400, body
    assert body["error"] == {
        "message": 'Invalid model identifier "o4-mini". Please specify a valid downloaded model (e.g., fake-model).',
        "type": "invalid_request_error", "param": "model", "code": "model_not_found"}
    assert fake.script.requests == []


async def test_the_model_lookup_and_v1_keep_their_404(stack):
    client, _ = stack
    status, body = await call(client, "GET", "/api/v0/models/o4-mini")
    assert (status, body["error"]["code"]) == (404, "model_not_found")
    status, body = await call(client, "POST", "/v1/chat/completions", {**CALLS[0][1], "model": "o4-mini"})
    assert (status, body["error"]["type"]) == (404, "not_found_error")
