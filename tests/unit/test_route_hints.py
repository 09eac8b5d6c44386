"""A 404 for a route of this server behind one prefix too many names the base URL to give the client (fake
scheduler). A client adds its own path to the base URL it is given: LibreChat given the full endpoint
(danny-avila/LibreChat#4924) asked /chat/completions/chat/completions, Cherry Studio's Ollama provider given
http://host:11434/v1 (CherryHQ/cherry-studio#13077) asked /v1/api/generate, and both got a bare 'no route' here, as
from vLLM, Ollama and llama-server, with nothing to say which address to give instead."""
import pytest


@pytest.mark.parametrize("method,path,given,added,right", [
    ("POST", "/v1/chat/completions/chat/completions", "/v1/chat/completions", "/chat/completions", "/v1"),
    ("POST", "/v1/api/generate", "/v1", "/api/generate", ""),
    ("POST", "/v1/api/chat", "/v1", "/api/chat", ""),
    ("GET", "/v1/api/tags", "/v1", "/api/tags", ""),
    ("POST", "/api/v0/v1/chat/completions", "/api/v0", "/v1/chat/completions", ""),
    ("POST", "/openai/v1/responses", "/openai", "/v1/responses", ""),
    ("POST", "/api/v1/messages", "/api", "/v1/messages", ""),
], ids=["openai-full-endpoint", "ollama-generate-under-v1", "ollama-chat-under-v1", "ollama-tags-under-v1",
        "lmstudio-v0-then-v1", "proxy-prefix-responses", "anthropic-under-api"])
async def test_a_route_behind_an_extra_prefix_names_the_base_url_to_give(stack, method, path, given, added, right):
    client, fake = stack
    response = await client.request(method, path, json={"model": "fake-model"})
    assert response.status == 404
    body = await response.json()
    message = body["error"] if isinstance(body["error"], str) else body["error"]["message"]
    host = f"http://{client.server.host}:{client.server.port}"
    assert message == (f"no route {path} (the client adds {added} to the base URL it was given, which ends in "
                       f"{given}: give it {host}{right} instead)")
    assert fake.script.requests == []


@pytest.mark.parametrize("path", ["/v1/nothing", "/api/nope", "/api/show/x", "/wp-login.php", "/%2Fv1/models"])
async def test_a_path_that_ends_in_no_route_is_a_bare_404(stack, path):
    """A %2F the router leaves as a path character (/%2Fv1/models is //v1/models) was read as a base URL ending
    in "/"."""
    client, _ = stack
    response = await client.get(path)
    path = path.replace("%2F", "/")
    body = await response.json()
    message = body["error"] if isinstance(body["error"], str) else body["error"]["message"]
    assert (response.status, message) == (404, f"no route {path}")


@pytest.mark.parametrize("path", ["/v1/files", "/v1/files/", "/v1/system", "/v1/llm"])
async def test_the_sdk_websocket_routes_give_no_hint_to_a_plain_request(stack, path):
    """LM Studio's SDK namespaces (/files, /system, /llm: websocket upgrades only) made the OpenAI and Anthropic SDKs'
    GET /v1/files, their files API, a 404 saying to give the client the address without /v1 (a base URL that was
    right, and that breaks every other call); tests/unit/test_anthropic_models.py's 404 case failed on it."""
    client, _ = stack
    response = await client.get(path)
    body = await response.json()
    assert (response.status, body["error"]["message"]) == (404, f"no route {path}")
