"""CORS with a list of allowed origins (SPARKINFER_ALLOWED_ORIGINS, as vLLM's --allowed-origins and Ollama's
OLLAMA_ORIGINS) and with credentials (vLLM's --allow-credentials), on the OpenAI, Anthropic, Ollama, LM Studio and
llama.cpp routes (fake scheduler). The default, any origin, is test_gateway_http_compat's."""
import orjson
import pytest

from gateway.config import parse_config
from gateway.cors import CorsPolicy, parse_origins
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

USER = [{"role": "user", "content": "hi"}]
AUTH = {"Authorization": "Bearer sk-test"}
LISTED = ("https://chat.example.com", "chrome-extension://*", "http://localhost:*")
# (path, body, the field of its error shape that holds the message)
ROUTES = [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 2}, lambda e: e["error"]["message"]),
    ("/v1/messages", {"model": "default", "max_tokens": 2, "messages": USER}, lambda e: e["error"]["message"]),
    ("/api/chat", {"model": "default", "messages": USER, "stream": False}, lambda e: e["error"]),
    ("/api/v0/chat/completions", {"messages": USER, "max_tokens": 2}, lambda e: e["error"]["message"]),
    ("/completion", {"prompt": "hi", "n_predict": 2}, lambda e: e["error"]["message"]),
]


async def _stack(**config):
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    fake.script.reply = "Hello world"
    return fake_gateway(fake, api_key="sk-test", **config)


@pytest.fixture
async def listed():
    async with await _stack(allowed_origins=LISTED) as pair:
        yield pair[0]


@pytest.fixture
async def credentials():
    async with await _stack(allow_credentials=True) as pair:
        yield pair[0]


def _headers(path: str, origin: str) -> dict:
    extra = {"anthropic-version": "2023-06-01"} if path == "/v1/messages" else {}
    return {**AUTH, **extra, "Origin": origin}


@pytest.mark.parametrize("path, body, message", ROUTES, ids=[r[0] for r in ROUTES])
@pytest.mark.parametrize("origin", ["https://chat.example.com", "chrome-extension://abcdef", "http://localhost:5173"])
async def test_a_listed_origin_is_served_and_echoed(listed, path, body, message, origin):
    response = await listed.post(path, headers=_headers(path, origin), data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    assert response.headers["Access-Control-Allow-Origin"] == origin
    assert "Origin" in response.headers["Vary"]
    assert "Access-Control-Allow-Credentials" not in response.headers
    await response.read()


@pytest.mark.parametrize("path, body, message", ROUTES, ids=[r[0] for r in ROUTES])
async def test_another_origin_is_refused_in_the_routes_error_shape(listed, path, body, message):
    """As Ollama answers a page OLLAMA_ORIGINS does not list (403), before the body is read: a page from elsewhere
    cannot drive the server with a text/plain POST, which needs no preflight."""
    response = await listed.post(path, headers={**_headers(path, "https://evil.example"), "Content-Type": "text/plain"},
                                 data=orjson.dumps(body))
    assert response.status == 403
    error = orjson.loads(await response.read())
    assert "'https://evil.example' is not allowed" in message(error)
    assert "SPARKINFER_ALLOWED_ORIGINS" in message(error)
    assert "Access-Control-Allow-Origin" not in response.headers


async def test_a_preflight_is_answered_for_a_listed_origin_only(listed):
    asked = {"Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization,x-api-key,anthropic-version,x-stainless-os"}
    ok = await listed.options("/v1/messages", headers={**asked, "Origin": "https://chat.example.com"})
    assert ok.status == 200
    assert ok.headers["Access-Control-Allow-Origin"] == "https://chat.example.com"
    assert ok.headers.getall("Vary") == ["Origin"]
    assert ok.headers["Access-Control-Allow-Headers"] == asked["Access-Control-Request-Headers"]
    refused = await listed.options("/api/chat", headers={**asked, "Origin": "http://localhost.evil.example"})
    assert refused.status == 403
    assert "not allowed" in orjson.loads(await refused.read())["error"]
    assert "Access-Control-Allow-Origin" not in refused.headers


async def test_requests_without_an_origin_are_served(listed):
    """curl, the SDKs and servers send no Origin: the list applies to browsers' cross-origin calls only."""
    response = await listed.get("/v1/models", headers=AUTH)
    assert response.status == 200
    assert (await response.json())["data"]
    assert "Access-Control-Allow-Origin" not in response.headers


async def test_private_network_access_is_allowed_for_a_listed_origin_never_for_any(listed):
    """Chrome's preflight for a public page calling a local server (developer.chrome.com/blog/private-network-access-
    preflight) needs Access-Control-Allow-Private-Network: true; only an origin the operator named gets it."""
    asked = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Private-Network": "true"}
    ok = await listed.options("/v1/chat/completions", headers={**asked, "Origin": "https://chat.example.com"})
    assert ok.status == 200 and ok.headers["Access-Control-Allow-Private-Network"] == "true"
    policy = CorsPolicy()
    assert "Access-Control-Allow-Private-Network" not in str(policy.response_headers("https://chat.example.com"))


async def test_credentials_echo_the_origin_instead_of_the_wildcard(credentials):
    """Browsers refuse Access-Control-Allow-Origin: * on a request with credentials (fetch's credentials: 'include');
    vLLM's --allow-credentials echoes the origin as Starlette does."""
    origin = "http://192.168.1.20:3000"
    response = await credentials.post("/v1/chat/completions", headers={**AUTH, "Origin": origin},
                                      data=orjson.dumps({"messages": USER, "max_tokens": 2, "stream": True}))
    assert response.status == 200
    assert response.headers["Access-Control-Allow-Origin"] == origin
    assert response.headers["Access-Control-Allow-Credentials"] == "true"
    assert b"data: [DONE]" in await response.read()
    denied = await credentials.get("/v1/models", headers={"Origin": origin})
    assert denied.status == 401 and denied.headers["Access-Control-Allow-Origin"] == origin
    preflight = await credentials.options("/v1/models", headers={"Origin": origin,
                                                                  "Access-Control-Request-Method": "GET"})
    assert preflight.headers["Access-Control-Allow-Credentials"] == "true"
    assert preflight.headers["Access-Control-Allow-Origin"] == origin


@pytest.mark.parametrize("text, origins", [
    ('["https://a.example", "http://localhost:*"]', ("https://a.example", "http://localhost:*")),
    ("https://a.example, chrome-extension://*", ("https://a.example", "chrome-extension://*")),
    ("*", ("*",)),
    ("[]", ()),
])
def test_the_origins_are_read_as_vllm_or_ollama_write_them(text, origins):
    assert parse_origins(text) == origins


def test_a_bad_origin_list_stops_the_start(monkeypatch, capsys):
    monkeypatch.setenv("SPARKINFER_ALLOWED_ORIGINS", '["https://a.example", 3]')
    with pytest.raises(SystemExit):
        parse_config([])
    assert "SPARKINFER_ALLOWED_ORIGINS" in capsys.readouterr().err


def test_a_wildcard_matches_within_one_origin_only():
    policy = CorsPolicy(("http://localhost:*",))
    assert policy.allows("http://localhost:8080")
    assert not policy.allows("http://localhost.evil.example")
    assert not policy.allows("https://localhost:8080")


@pytest.mark.parametrize("path", ["/v1/embeddings", "/v1/messages"])
async def test_a_page_may_read_the_headers_the_sdks_decide_retries_by(listed, path):
    """openai-node and anthropic-sdk-typescript read x-should-retry before the status (shouldRetry); a page sees only
    the headers Access-Control-Expose-Headers names, so a 501's x-should-retry: false was null there and the SDK
    retried it."""
    body = {"model": "default", "input": "hi"} if path == "/v1/embeddings" else {"model": "nope", "max_tokens": 2,
                                                                                "messages": USER}
    response = await listed.post(path, headers=_headers(path, "https://chat.example.com"), data=orjson.dumps(body))
    exposed = {h.strip().lower() for h in response.headers["Access-Control-Expose-Headers"].split(",")}
    sent = {h.lower() for h in response.headers} & {"x-should-retry", "retry-after", "x-request-id", "request-id"}
    assert sent and sent <= exposed, (sent, exposed)
    if path == "/v1/embeddings":
        assert response.status == 501 and response.headers["x-should-retry"] == "false"
