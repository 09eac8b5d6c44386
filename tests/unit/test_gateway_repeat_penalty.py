"""/v1 repeat_penalty (fake scheduler): LM Studio's OpenAI-compatible /v1/chat/completions lists repeat_penalty among
its supported payload parameters (lmstudio.ai/docs/developer/openai-compat/chat-completions), as /api/v0 already took
it here; on /v1 it was logged as an unknown field and ignored, so the scheduler got the checkpoint's
repetition_penalty (1.0) and the answer repeated as if it had not been sent. vLLM's repetition_penalty wins."""
import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
ROUTES = [("/v1/chat/completions", {"messages": USER, "enable_thinking": False}),
          ("/v1/completions", {"prompt": "hi"})]
IDS = ["chat", "completions"]


def text_of(body: dict) -> str:
    choice = body["choices"][0]
    return choice["text"] if "text" in choice else choice["message"]["content"]


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
@pytest.mark.parametrize("fields, sent", [({"repeat_penalty": 1.3}, 1.3),
                                          ({"repeat_penalty": 1.3, "repetition_penalty": 1.1}, 1.1),
                                          ({"repeat_penalty": None}, 1.0), ({}, 1.0)],
                         ids=["repeat_penalty", "repetition_penalty-wins", "null", "neither"])
async def test_repeat_penalty_reaches_the_sampler(stack, path, base, fields, sent):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**base, "max_tokens": 8, **fields}))
    body = orjson.loads(await response.read())
    assert response.status == 200, body
    assert text_of(body) == "Hello world" and body["choices"][0]["finish_reason"] == "stop"
    assert fake.script.requests[-1].sampling.repetition_penalty == pytest.approx(sent)


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
@pytest.mark.parametrize("value, code, words", [
    (0, "invalid_value", "0 is less than or equal to the minimum of 0"),
    (10.5, "invalid_value", "10.5 is greater than the maximum of 10"),
    ("strong", "invalid_type", '"strong" is not of type "number", "null"')], ids=["zero", "above-ten", "string"])
async def test_a_bad_repeat_penalty_is_a_400_naming_it(stack, path, base, value, code, words):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**base, "repeat_penalty": value}))
    assert response.status == 400
    assert orjson.loads(await response.read()) == {"error": {
        "message": f"invalid value for 'repeat_penalty': {words}", "type": "invalid_request_error",
        "param": "repeat_penalty", "code": code}}
    assert fake.script.requests == []
