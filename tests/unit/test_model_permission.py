"""GET /v1/models (and /v1/models/{id}, llama.cpp's /models) lists each model's `permission` array as vLLM's model
card does (one ModelPermission: sampling and logprobs allowed, organization "*"). OpenAI's model object carried it until
November 2023, and clients written against it require it: openai-kotlin 3.5.0 failed with "Field 'permission' is
required for type ... Model" (aallam/openai-kotlin#249), PHP clients read permission[0].allow_sampling
(orhanerday/open-ai#112)."""
import pytest

PERMISSION_KEYS = ["id", "object", "created", "allow_create_engine", "allow_sampling", "allow_logprobs",
                   "allow_search_indices", "allow_view", "allow_fine_tuning", "organization", "group", "is_blocking"]


async def _models(client, path: str) -> list:
    body = await (await client.get(path)).json()
    return body["data"] if path != "/v1/models/fake-model" else [body]


@pytest.mark.parametrize("path", ["/v1/models", "/v1/models/fake-model", "/models"])
async def test_each_model_lists_vllms_permission(stack, path):
    client, _ = stack
    (model,) = await _models(client, path)
    (permission,) = model["permission"]
    assert list(permission) == PERMISSION_KEYS
    assert permission["id"].startswith("modelperm-") and len(permission["id"]) == len("modelperm-") + 32
    assert {k: v for k, v in permission.items() if k != "id"} == {
        "object": "model_permission", "created": model["created"], "allow_create_engine": False,
        "allow_sampling": True, "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
        "allow_fine_tuning": False, "organization": "*", "group": None, "is_blocking": False}
    # In vLLM's place in the card: after max_model_len.
    assert list(model)[:8] == ["id", "object", "created", "owned_by", "root", "parent", "max_model_len", "permission"]


async def test_the_permission_id_is_the_same_on_every_listing(stack):
    client, _ = stack
    ids = {(await _models(client, path))[0]["permission"][0]["id"]
           for path in ["/v1/models", "/v1/models/fake-model", "/models", "/v1/models"]}
    assert len(ids) == 1
