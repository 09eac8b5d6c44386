"""A long string where a field takes a name from a list, a short name or a number (fake scheduler): the 400 of every
API that words it with the schema's reasons comes in its own shape, names the field, shows the value shortened, and
costs little CPU. schema_errors.json_spelling compiled one regular expression of the values' reprs, so a 2 MB role
took 10 s of CPU to word (the re module compiles in Python) and re's cache kept the pattern."""
import time

import orjson
import pytest

LONG = "ab c\n" * 400_000
HI = [{"role": "user", "content": "hi"}]
BAD_ROLE = [{"role": LONG, "content": "hi"}]
# (path, body, the field the message names, the API's error shape)
CASES = {
    "chat-role": ("/v1/chat/completions", {"messages": BAD_ROLE, "max_tokens": 1}, "messages[0].role", "openai"),
    "lmstudio-role": ("/api/v0/chat/completions", {"messages": BAD_ROLE}, "messages[0].role", "openai"),
    "tokenize-role": ("/v1/tokenize", {"model": "fake-model", "messages": BAD_ROLE}, "messages[0].role", "openai"),
    "render-role": ("/v1/chat/completions/render", {"model": "fake-model", "messages": BAD_ROLE},
                    "messages[0].role", "openai"),
    "completions-max-tokens": ("/v1/completions", {"prompt": "hi", "max_tokens": LONG}, "max_tokens", "openai"),
    "responses-tool-name": ("/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": LONG}]},
                            "tools[0].name", "openai"),
    "anthropic-role": ("/v1/messages", {"model": "fake-model", "max_tokens": 1, "messages": BAD_ROLE},
                       "messages.0.role", "anthropic"),
    "anthropic-count-role": ("/v1/messages/count_tokens", {"model": "fake-model", "messages": BAD_ROLE},
                             "messages.0.role", "anthropic"),
    "llama-cpp-n-predict": ("/completion", {"prompt": "hi", "n_predict": LONG}, "n_predict", "llama.cpp"),
    "sglang-max-new-tokens": ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": LONG}},
                              "max_new_tokens", "openai"),
    "vllm-generate-max-tokens": ("/inference/v1/generate", {"token_ids": [1], "sampling_params": {"max_tokens": LONG}},
                                 "max_tokens", "openai"),
}


def _message(api: str, status: int, body: dict) -> str:
    """The error's message, once the body is in the API's own error shape."""
    if api == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert set(body) == {"error"} and body["error"]["type"] == "invalid_request_error"
        assert body["error"].get("code") == status if api == "llama.cpp" else True
    return body["error"]["message"]


@pytest.mark.parametrize("case", list(CASES))
async def test_a_long_value_is_a_short_400_naming_the_field_at_little_cost(stack, case):
    client, fake = stack
    path, body, field, api = CASES[case]
    # Each case's own value: re's cache kept a compiled pattern, so a value sent twice was worded fast the second time.
    data = orjson.dumps(body).replace(b"ab c\\nab c", f"ab c\\n{case}".encode(), 1)
    started = time.process_time()
    response = await client.post(path, data=data, headers={"Content-Type": "application/json"})
    raw = await response.read()
    cpu = time.process_time() - started
    assert response.status == 400, raw[:300]
    message = _message(api, 400, orjson.loads(raw))
    assert field in message and len(message) < 1000, message
    assert '"ab c\\n' in message and "..." in message and 'ab c\\n"' in message, message
    # CPU time, not wall time, so that a loaded machine does not fail it: 3 s and more before, about 0.1 s after.
    assert cpu < 1.5, f"{cpu:.1f} s of CPU to refuse a {len(data)}-byte body"
    assert fake.script.requests == []
