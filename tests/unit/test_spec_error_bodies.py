"""The errors the router and body parser write before a handler runs (no JSON, a JSON array, bytes that are no UTF-8,
a method or path no route serves, an API this server lacks) held up to each API's published ErrorResponse
(spec_schemas/: openai-openapi's ErrorResponse, anthropic-sdk-python's ErrorResponse, ollama's docs/openapi.yaml
ErrorResponse, which Ollama's Go server writes as {"error": "..."} alone)."""
import pytest

from tests.unit.spec_oracle import spec_errors

ANTHROPIC = {"anthropic-version": "2023-06-01"}
CASES = {
    "openai_no_json": ("openai", "POST", "/v1/chat/completions", "{bad", {}, 400),
    "openai_array": ("openai", "POST", "/v1/completions", "[1,2]", {}, 400),
    "openai_not_utf8": ("openai", "POST", "/v1/chat/completions", b"\xff\xfe", {}, 400),
    "openai_method": ("openai", "PUT", "/v1/chat/completions", "{}", {}, 405),
    "openai_path": ("openai", "GET", "/v1/chat/completions/xyz", None, {}, 404),
    "openai_model_delete": ("openai", "DELETE", "/v1/models/fake-model", None, {}, 405),
    "openai_embeddings": ("openai", "POST", "/v1/embeddings", "{}", {}, 501),
    "responses_no_json": ("openai", "POST", "/v1/responses", "{bad", {}, 400),
    "anthropic_no_json": ("anthropic", "POST", "/v1/messages", "{bad", ANTHROPIC, 400),
    "anthropic_array": ("anthropic", "POST", "/v1/messages", "[]", ANTHROPIC, 400),
    "anthropic_method": ("anthropic", "GET", "/v1/messages", None, ANTHROPIC, 405),
    "anthropic_batches": ("anthropic", "POST", "/v1/messages/batches", "{}", ANTHROPIC, 404),
    "anthropic_count_no_json": ("anthropic", "POST", "/v1/messages/count_tokens", "{bad", ANTHROPIC, 400),
    "ollama_no_json": ("ollama", "POST", "/api/chat", "{bad", {}, 400),
    "ollama_array": ("ollama", "POST", "/api/generate", "[]", {}, 400),
    "ollama_method": ("ollama", "GET", "/api/chat", None, {}, 405),
    "ollama_path": ("ollama", "POST", "/api/nope", "{}", {}, 404),
    "ollama_show_no_model": ("ollama", "POST", "/api/show", "{}", {}, 400),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
async def test_framework_errors_match_the_apis_error_response(stack, case):
    client, _ = stack
    api, method, path, data, headers, status = CASES[case]
    response = await client.request(method, path, data=data, headers={**headers, "Content-Type": "application/json"})
    body = await response.json()
    assert response.status == status
    assert spec_errors(api, "ErrorResponse", body) == []
    if api == "ollama":
        assert list(body) == ["error"]
