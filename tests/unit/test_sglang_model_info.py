"""SGLang's GET /model_info (and its older name /get_model_info, which SGLang still answers) and /weight_version:
SGLang clients read the served model from them (is_generation, has_image_understanding for a provider's capability
list, model_path and architectures to recognise the server), and each was our 404 "no route". The body is SGLang's
http_server model_info: the checkpoint, a generative text-only model, SGLang's default weight version "default",
config.json's model_type and architectures."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

INFO = {"model_path": "fake-model", "tokenizer_path": "fake-model", "is_generation": True,
        "preferred_sampling_params": None, "weight_version": "default", "has_image_understanding": False,
        "has_audio_understanding": False, "model_type": "qwen3_5", "architectures": ["qwen3_5"]}


@pytest.mark.parametrize("path", ["/model_info", "/get_model_info"])
async def test_model_info_is_sglangs(stack, path):
    client, _ = stack
    response = await client.get(path)
    assert response.status == 200 and response.content_type == "application/json"
    assert list(await response.json()) == list(INFO)
    assert await response.json() == INFO


async def test_architectures_come_from_config_json():
    fake = FakeServing(build_tokenizer())
    fake.config = orjson.dumps({"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"]}).decode()
    async with fake_gateway(fake) as (client, _):
        info = await (await client.get("/model_info")).json()
    assert (info["model_type"], info["architectures"]) == ("qwen3_5", ["Qwen3_5ForConditionalGeneration"])


@pytest.mark.parametrize("path", ["/weight_version", "/get_weight_version"])
async def test_weight_version_is_the_default(stack, path):
    client, _ = stack
    assert await (await client.get(path)).json() == {"weight_version": "default"}


async def test_the_api_key_covers_them_as_sglang_does():
    async with fake_gateway(FakeServing(build_tokenizer()), api_key="s3cret") as (client, _):
        refused = await client.get("/model_info")
        body = await refused.json()
        allowed = await client.get("/model_info", headers={"Authorization": "Bearer s3cret"})
        assert (refused.status, body["error"]["type"], allowed.status) == (401, "authentication_error", 200)
