"""An error that quotes what the client sent stays short when that is as long as a body (fake scheduler): "The model
'...' does not exist" came back 1 MB long for a 1 MB model name on every route, as did Ollama's format and keep_alive
errors, the Responses input role and Anthropic's block type. The message keeps its start and its end, in each API's
own error shape (errors.MAX_MESSAGE_CHARS)."""
import orjson
import pytest

from gateway.errors import MAX_MESSAGE_CHARS

LONG = "Q" * 1_000_000
HI = [{"role": "user", "content": "hi"}]
# (path, body, the API's error shape)
CASES = {
    "chat-model": ("/v1/chat/completions", {"model": LONG, "messages": HI}, "openai"),
    "completions-model": ("/v1/completions", {"model": LONG, "prompt": "hi"}, "openai"),
    "responses-model": ("/v1/responses", {"model": LONG, "input": "hi"}, "openai"),
    "responses-input-role": ("/v1/responses/input_tokens", {"input": [{"role": LONG, "content": "hi"}]}, "openai"),
    "tokenize-model": ("/v1/tokenize", {"model": LONG, "prompt": "hi"}, "openai"),
    "lmstudio-v0-model": ("/api/v0/chat/completions", {"model": LONG, "messages": HI}, "openai"),
    "lmstudio-v1-model": ("/api/v1/chat", {"model": LONG, "input": "hi"}, "openai"),
    "render-model": ("/v1/chat/completions/render", {"model": LONG, "messages": HI}, "openai"),
    "vllm-generate-model": ("/inference/v1/generate", {"model": LONG, "token_ids": [1], "sampling_params": {}},
                            "openai"),
    "anthropic-model": ("/v1/messages", {"model": LONG, "max_tokens": 1, "messages": HI}, "anthropic"),
    "anthropic-block-type": ("/v1/messages/count_tokens", {"model": "fake-model", "messages": HI,
                                                           "system": [{"type": LONG}]}, "anthropic"),
    "ollama-format": ("/api/chat", {"model": "fake-model", "messages": HI, "format": LONG}, "ollama"),
    "ollama-keep-alive": ("/api/chat", {"model": "fake-model", "messages": HI, "keep_alive": LONG}, "ollama"),
}


def _message(api: str, body: dict) -> str:
    """The message, once the body is in the API's own error shape."""
    if api == "ollama":
        assert set(body) == {"error"} and isinstance(body["error"], str)
        return body["error"]
    if api == "anthropic":
        assert body["type"] == "error" and isinstance(body["error"]["type"], str)
    else:
        assert set(body) == {"error"} and isinstance(body["error"]["type"], str)
    return body["error"]["message"]


@pytest.mark.parametrize("case", list(CASES))
async def test_an_error_quoting_a_long_value_is_short_and_keeps_its_ends(stack, case):
    client, fake = stack
    path, body, api = CASES[case]
    response = await client.post(path, data=orjson.dumps(body), headers={"Content-Type": "application/json"})
    raw = await response.read()
    assert 400 <= response.status < 500, raw[:300]
    message = _message(api, orjson.loads(raw))
    assert len(message) <= MAX_MESSAGE_CHARS and " ... " in message, len(message)
    # Its start (the field's or check's words) and its end (what follows the value) are kept.
    assert not message.startswith("QQQ") and "QQQQ ... QQQQ" in message, message[:200]
    assert len(raw) < 2 * MAX_MESSAGE_CHARS
    assert fake.script.requests == []
