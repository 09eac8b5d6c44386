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


@pytest.mark.parametrize("route, body", [("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)],
                         ids=["chat", "completions"])
@pytest.mark.parametrize("field, value, param, words, code", [
    ("cache_salt", "s" * 1025, "cache_salt", f'"{"s" * 28}...{"s" * 28}" is too long', "invalid_value"),
    ("vllm_xargs", {"k": {"n": 1}}, "vllm_xargs.k", '{"n": 1} is not of type "string", "number", "boolean", "array"',
     "invalid_type"),
    ("vllm_xargs", {"k": [[1]]}, "vllm_xargs.k[0]", '[1] is not of type "string", "number", "boolean"', "invalid_type"),
    ("routed_experts_prompt_start", -1, "routed_experts_prompt_start", "-1 is less than the minimum of 0",
     "invalid_value"),
    ("return_token_offsets", "perhaps", "return_token_offsets", '"perhaps" is not of type "boolean", "null"',
     "invalid_type"),
    ("return_mm_kwargs", "perhaps", "return_mm_kwargs", '"perhaps" is not of type "boolean", "null"', "invalid_type"),
    ("ec_transfer_params", 5, "ec_transfer_params", '5 is not of type "object", "null"', "invalid_type"),
    ("priority", 1 << 63, "priority", f"{1 << 63} is greater than the maximum of {(1 << 63) - 1}", "invalid_value"),
], ids=["long-salt", "xarg-object", "xarg-nested-list", "routed-start", "offsets", "mm-kwargs", "ec-params",
        "priority"])
async def test_vllm_extension_fields_are_typed_as_vllm_types_them(stack, route, body, field, value, param, words,
                                                                   code):
    """vLLM's CompletionRequest and ChatCompletionRequest (vllm/entrypoints/openai/{completion,chat_completion}/
    protocol.py) type these: cache_salt max_length 1024, vllm_xargs dict[str, str | int | float | list[...]],
    routed_experts_prompt_start ge=0, return_token_offsets / return_mm_kwargs bool, ec_transfer_params dict, priority
    an int64. Each value here is vLLM's 400; it was taken (200) and ignored."""
    client, fake = stack
    response = await client.post(route, json={**body, field: value})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error == _error(param, words, code)["error"]
    assert not fake.script.requests


@pytest.mark.parametrize("field, value, param, words", [
    ("documents", [{"title": "t", "text": 5}], "documents[0].text", '5 is not of type "string"'),
    ("mm_processor_kwargs", "fps=2", "mm_processor_kwargs", '"fps=2" is not of type "object", "null"'),
    ("media_io_kwargs", {"video": 2}, "media_io_kwargs.video", '2 is not of type "object"'),
], ids=["document-value", "processor-kwargs", "media-kwargs"])
async def test_vllm_chat_only_fields_are_typed(stack, field, value, param, words):
    """vLLM's ChatCompletionRequest: documents list[dict[str, str]], mm_processor_kwargs dict[str, Any],
    media_io_kwargs dict[str, dict[str, Any]]."""
    client, fake = stack
    response = await client.post("/v1/chat/completions", json={**CHAT, field: value})
    assert response.status == 400 and await response.json() == _error(param, words)
    assert not fake.script.requests


async def test_values_vllm_takes_are_served(stack):
    client, _ = stack
    extra = {"cache_salt": "s" * 1024, "vllm_xargs": {"a": [1, "x", 2.5], "b": True, "c": "s"}, "priority": -(1 << 63),
             "routed_experts_prompt_start": 3, "return_token_offsets": False, "return_mm_kwargs": True,
             "ec_transfer_params": {}, "documents": [{"title": "t", "text": "x"}], "mm_processor_kwargs": {"fps": 2},
             "media_io_kwargs": {"video": {"num_frames": 8}}}
    response = await client.post("/v1/chat/completions", json={**CHAT, **extra})
    assert response.status == 200, await response.text()
