"""/v1 typical_p (fake scheduler): llama.cpp server's locally typical sampling, which its OpenAI-compatible routes
take as every /completion option, reaches the worker's typical sampler (Ollama's options.typical_p already did); it
was a 400 'typical sampling (typical_p < 1) is not supported' on /v1 and /api/v0."""
import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
ROUTES = [("/v1/chat/completions", {"messages": USER, "enable_thinking": False}),
          ("/v1/completions", {"prompt": "hi"}),
          ("/api/v0/chat/completions", {"messages": USER, "enable_thinking": False})]
IDS = ["chat", "completions", "lmstudio"]


def text_of(body: dict) -> str:
    choice = body["choices"][0]
    return choice["text"] if "text" in choice else choice["message"]["content"]


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
@pytest.mark.parametrize("value, sent", [(0.5, 0.5), (1, 1.0), (None, 1.0), (0, 1e-9)],
                         ids=["half", "one-is-off", "null-is-off", "zero-keeps-one-token"])
async def test_typical_p_reaches_the_sampler(stack, path, base, value, sent):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**base, "max_tokens": 8, "typical_p": value}))
    body = orjson.loads(await response.read())
    assert response.status == 200, body
    assert text_of(body) == "Hello world" and body["choices"][0]["finish_reason"] == "stop"
    assert fake.script.requests[-1].sampling.typical_p == pytest.approx(sent, rel=1e-6)


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
@pytest.mark.parametrize("value, words", [(1.5, "1.5 is greater than the maximum of 1"),
                                          (-0.1, "-0.1 is less than the minimum of 0")], ids=["above", "below"])
async def test_typical_p_outside_zero_to_one_is_a_400(stack, path, base, value, words):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**base, "typical_p": value}))
    assert response.status == 400
    assert orjson.loads(await response.read()) == {"error": {
        "message": f"invalid value for 'typical_p': {words}", "type": "invalid_request_error",
        "param": "typical_p", "code": "invalid_value"}}
    assert fake.script.requests == []
