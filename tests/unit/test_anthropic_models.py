"""GET /v1/models for the Anthropic SDKs (they send anthropic-version): each model object also has Anthropic's
ModelInfo fields (type, display_name, created_at as RFC 3339, lifecycle) and limits (max_input_tokens, max_tokens), and
the list Anthropic's page fields, which those SDKs type as always there; an OpenAI client's list is unchanged."""
import datetime

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
