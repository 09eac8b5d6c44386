"""The checkpoint folder as the server was started with it (MODEL) names the model on /v1 too, as it does on vLLM,
whose served name is its --model as given unless --served-model-name replaces it (fake scheduler)."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

PATH = "/data/models/Fake-Model"
CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def _fake(path: str = PATH) -> FakeServing:
    fake = FakeServing(build_tokenizer())
    fake.model_path = path
    return fake


@pytest.mark.parametrize("name", [PATH, PATH + "/", "default", "fake-model"])
async def test_the_checkpoint_path_names_the_model(name):
    # microsoft/agent-lightning#37, THUDM/LongBench#102, vllm-project/vllm#3486: clients set up against vLLM send the
    # path they served (`vllm serve /data/models/X` answers to "/data/models/X" alone). Before, with MODEL that path,
    # such a request was the 404 "The model '/data/models/Fake-Model' does not exist. This server serves 'fake-model'".
    async with fake_gateway(_fake()) as (client, _):
        for path, body in (("/v1/chat/completions", CHAT), ("/v1/completions", {"prompt": "hi", "max_tokens": 2})):
            response = await client.post(path, json={"model": name, **body})
            assert response.status == 200, await response.text()
            assert (await response.json())["model"] == "fake-model"


@pytest.mark.parametrize("name", ["/data/models/Other", "Fake-Model", "/data/models", "data/models/Fake-Model"])
async def test_other_paths_stay_unknown(name):
    async with fake_gateway(_fake()) as (client, _):
        response = await client.post("/v1/chat/completions", json={"model": name, **CHAT})
        assert response.status == 404
        assert (await response.json())["error"]["code"] == "model_not_found"


async def test_models_root_is_the_checkpoint_path():
    # vLLM's ModelCard root is the model path it serves (vllm/entrypoints/openai/models/serving.py); it was the
    # checkpoint's folder name here, which a client cannot load a tokenizer from.
    async with fake_gateway(_fake()) as (client, _):
        listed = (await (await client.get("/v1/models")).json())["data"][0]
        assert (listed["id"], listed["root"]) == ("fake-model", PATH)


async def test_without_a_path_the_root_is_the_checkpoint_id():
    async with fake_gateway(_fake("")) as (client, _):
        listed = (await (await client.get("/v1/models")).json())["data"][0]
        assert (listed["id"], listed["root"]) == ("fake-model", "fake-model")
        response = await client.post("/v1/chat/completions", json={"model": "", **CHAT})
        assert response.status == 200


@pytest.mark.parametrize("route, fields", [("/model_info", ("model_path", "tokenizer_path")),
                                           ("/get_server_info", ("model_path", "tokenizer_path")),
                                           ("/props", ("model_path",))],
                         ids=["sglang-model-info", "sglang-server-info", "llama-cpp-props"])
async def test_server_info_routes_name_the_checkpoint_path(route, fields):
    # SGLang's model_path / tokenizer_path are its --model-path as given (server_args), which its clients load the
    # tokenizer from; llama-server's /props model_path is its -m path. Both said the folder's name ("fake-model").
    async with fake_gateway(_fake()) as (client, _):
        info = await (await client.get(route)).json()
        assert [info[field] for field in fields] == [PATH] * len(fields)
