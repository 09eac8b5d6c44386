"""GET /v1/models for the Anthropic SDKs (they send anthropic-version): each model object also has Anthropic's
ModelInfo fields (type, display_name, created_at as RFC 3339, lifecycle) and limits (max_input_tokens, max_tokens), and
the list Anthropic's page fields, which those SDKs type as always there; an OpenAI client's list is unchanged."""
import datetime

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

ANTHROPIC = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}


async def test_an_anthropic_client_gets_model_info(stack):
    client, _ = stack
    listed = await (await client.get("/v1/models", headers=ANTHROPIC)).json()
    model = listed["data"][0]
    created_at = datetime.datetime.fromtimestamp(model["created"], datetime.timezone.utc)
    assert (model["type"], model["id"], model["display_name"]) == ("model", "fake-model", "fake-model")
    assert model["created_at"] == created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (model["lifecycle"], model["max_input_tokens"], model["max_tokens"]) == ("active", 2048, 2048)
    assert (listed["has_more"], listed["first_id"], listed["last_id"]) == (False, "fake-model", "fake-model")
    one = await (await client.get("/v1/models/fake-model", headers=ANTHROPIC)).json()
    assert one == model


async def test_an_openai_client_list_is_unchanged(stack):
    client, _ = stack
    listed = await (await client.get("/v1/models")).json()
    assert set(listed) == {"object", "data", "models"}
    assert set(listed["data"][0]) == {"id", "object", "created", "owned_by", "root", "parent", "max_model_len",
                                      "permission", "meta"}


async def test_an_anthropic_client_lists_with_its_key_and_gets_its_errors():
    """The Anthropic SDKs send the key as x-api-key, on models.list() too: with a key set, /v1/models took only the
    Bearer token, so their list was a 401, and its errors (a wrong key, an unknown model) came in OpenAI's shape
    where Anthropic answers {"type": "error", "error": {type, message}} with a request-id header."""
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    async with fake_gateway(fake, api_key="sekret") as (client, _):
        headers = {"anthropic-version": "2023-06-01", "x-api-key": "sekret"}
        listed = await client.get("/v1/models", headers=headers)
        assert listed.status == 200 and (await listed.json())["data"][0]["type"] == "model"
        for path, key, status, kind in [("/v1/models", "wrong", 401, "authentication_error"),
                                        ("/v1/models/nope", "sekret", 404, "not_found_error")]:
            response = await client.get(path, headers={**headers, "x-api-key": key})
            body = await response.json()
            assert (response.status, body["type"], body["error"]["type"]) == (status, "error", kind)
            assert response.headers["request-id"] == body["request_id"]
        # An OpenAI client (no anthropic-version) keeps the Bearer token and OpenAI's error object.
        response = await client.get("/v1/models", headers={"x-api-key": "sekret"})
        assert response.status == 401 and (await response.json())["error"]["code"] == "invalid_api_key"


async def test_an_anthropic_sdk_api_this_server_lacks_is_a_404_in_anthropics_shape():
    """The Anthropic SDKs' other APIs (client.beta.files, .skills: /v1/files, /v1/skills) have no route here. With a
    key set, their x-api-key was not read there, so the answer was a 401 'missing or invalid API key' that blamed the
    right key; without one, a 404 in OpenAI's shape. Now Anthropic's 404 {"type": "error", ...} with its request-id."""
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    async with fake_gateway(fake, api_key="sekret") as (client, _):
        headers = {"anthropic-version": "2023-06-01", "x-api-key": "sekret"}
        for path in ("/v1/files", "/v1/skills", "/v1/files/file_011/content"):
            response = await client.get(path, headers=headers)
            body = await response.json()
            assert (response.status, body["type"], body["error"]["type"]) == (404, "error", "not_found_error"), body
            assert body["error"]["message"] == f"no route {path}"
            assert response.headers["request-id"] == body["request_id"]
        response = await client.get("/v1/files", headers={**headers, "x-api-key": "wrong"})
        assert (response.status, (await response.json())["error"]["type"]) == (401, "authentication_error")
        # The OpenAI routes keep the Bearer token and OpenAI's error object, whatever headers come with them.
        response = await client.post("/v1/chat/completions", json={}, headers=headers)
        assert response.status == 401 and (await response.json())["error"]["code"] == "invalid_api_key"
        response = await client.get("/v1/files", headers={"Authorization": "Bearer sekret"})
        assert response.status == 404 and (await response.json())["error"]["code"] == "not_found"


async def test_another_apis_route_asked_with_the_wrong_method_keeps_its_key_and_shape():
    """A route of the OpenAI API asked with a method it does not take is that API's 405, with the Bearer key, whatever
    headers come with it: only a path no route serves is the Anthropic SDKs' 404 (041fd10). GET /v1/chat/completions
    with anthropic-version took the key as x-api-key and answered in Anthropic's shape."""
    async with fake_gateway(FakeServing(build_tokenizer()), api_key="sekret") as (client, _):
        headers = {"anthropic-version": "2023-06-01", "x-api-key": "sekret"}
        response = await client.get("/v1/chat/completions", headers=headers)
        assert response.status == 401 and (await response.json())["error"]["code"] == "invalid_api_key"
        response = await client.get("/v1/chat/completions", headers={**headers, "Authorization": "Bearer sekret"})
        body = await response.json()
        assert response.status == 405 and body["error"]["code"] == "method_not_allowed" and "type" not in body, body
        response = await client.get("/v1/messages", headers=headers)  # Anthropic's own route: its shape
        assert response.status == 405 and (await response.json())["type"] == "error"
