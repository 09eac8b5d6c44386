"""Request fields accepted without effect still have their type checked, as vLLM's pydantic request models and
OpenAI check them: /v1/tokenize took add_special_tokens: "yes", chat and completions took any value for
kv_transfer_params, vllm_xargs (vLLM: dicts), safety_identifier, prompt_cache_key (OpenAI: strings) and verbosity."""
import pytest

CHAT = {"messages": [{"role": "user", "content": "hi"}]}
COMPLETION = {"prompt": "hi"}


def _error(field: str, words: str, code: str = "invalid_type") -> dict:
    return {"error": {"message": f"invalid value for '{field}': {words}", "type": "invalid_request_error",
                      "param": field, "code": code}}


@pytest.mark.parametrize("route, body", [("/v1/tokenize", COMPLETION), ("/tokenize", CHAT)], ids=["prompt", "chat"])
async def test_tokenize_add_special_tokens_is_a_boolean(stack, route, body):
    client, _ = stack
    response = await client.post(route, json={**body, "add_special_tokens": "perhaps"})
    assert response.status == 400
    assert await response.json() == _error("add_special_tokens", '"perhaps" is not of type "boolean", "null"')
    ok = await client.post(route, json={**body, "add_special_tokens": True})
    assert ok.status == 200 and (await ok.json())["count"] > 0


@pytest.mark.parametrize("route, body", [("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)],
                         ids=["chat", "completions"])
@pytest.mark.parametrize("field, value, words, code", [
    ("kv_transfer_params", "x", '"x" is not of type "object", "null"', "invalid_type"),
    ("vllm_xargs", [1], '[1] is not of type "object", "null"', "invalid_type"),
    ("safety_identifier", 7, '7 is not of type "string", "null"', "invalid_type"),
    ("prompt_cache_key", {"k": 1}, '{"k": 1} is not of type "string", "null"', "invalid_type"),
    ("verbosity", "loud", '"loud" is not one of ["low", "medium", "high", null]', "invalid_value"),
])
async def test_no_effect_fields_are_typed(stack, route, body, field, value, words, code):
    client, fake = stack
    response = await client.post(route, json={**body, field: value})
    assert response.status == 400 and await response.json() == _error(field, words, code)
    assert not fake.script.requests
