"""SPARKINFER_SERVED_MODEL_NAME with several names, as vLLM's --served-model-name takes them (nargs="+"): every one
is the model's name, the first names it in answers (fake scheduler)."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from proto.served_names import served_names

NAMES = "qwen-prod, gpt-4o gpt-4o-mini"
CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.mark.parametrize("value, names", [(NAMES, ["qwen-prod", "gpt-4o", "gpt-4o-mini"]), ("one", ["one"]),
                                          ("a,b", ["a", "b"]), (" a  b ", ["a", "b"]), ("", []), (None, [])])
def test_names_are_split_at_commas_and_blanks(value, names):
    assert served_names(value) == names


@pytest.mark.parametrize("name", ["qwen-prod", "gpt-4o", "gpt-4o-mini", "gpt-4o:latest", "fake-model", "default"])
async def test_every_served_name_is_the_model(name):
    # vllm-project/vllm#1988 (a maintainer's answer: `--served-model-name long-specific-name default` lets a backend
    # always call `default`), #2894: clients move to vLLM with aliases such as gpt-4o. Before, the variable's whole
    # text was one name: {model: "gpt-4o"} was the 404 "This server serves 'qwen-prod, gpt-4o gpt-4o-mini'".
    async with fake_gateway(FakeServing(build_tokenizer()), served_model_name=NAMES) as (client, _):
        response = await client.post("/v1/chat/completions", json={"model": name, **CHAT})
        assert response.status == 200, await response.text()
        assert (await response.json())["model"] == "qwen-prod"


async def test_models_lists_each_name_and_health_the_first():
    async with fake_gateway(FakeServing(build_tokenizer()), served_model_name=NAMES) as (client, _):
        listed = (await (await client.get("/v1/models")).json())["data"]
        assert [model["id"] for model in listed] == ["qwen-prod", "gpt-4o", "gpt-4o-mini"]
        assert {model["root"] for model in listed} == {"fake-model"}
        assert (await (await client.get("/v1/models/gpt-4o")).json())["id"] == "gpt-4o"
        assert (await (await client.get("/health")).json())["model"] == "qwen-prod"
        response = await client.post("/v1/chat/completions", json={"model": "gpt-5", **CHAT})
        assert response.status == 404
        assert "'qwen-prod'" in (await response.json())["error"]["message"]


@pytest.mark.parametrize("path, body", [("/v1/chat/completions", CHAT), ("/v1/completions", {"prompt": "hi"}),
                                        ("/v1/responses", {"input": "hi", "max_output_tokens": 2}),
                                        ("/v1/messages", {**CHAT, "max_tokens": 2})],
                         ids=["chat", "completions", "responses", "anthropic"])
async def test_skip_model_name_validation_takes_any_name(path, body):
    # vllm-project/vllm#34676 (VLLM_SKIP_MODEL_NAME_VALIDATION): Claude Code calls its small model (haiku) and others
    # beside the main one, and proxies rename models; with the switch on any name is the served model. Without it,
    # {model: "claude-3-5-haiku-20241022"} stays the 404 model_not_found.
    async with fake_gateway(FakeServing(build_tokenizer()), skip_model_name_validation=True) as (client, _):
        response = await client.post(path, json={"model": "claude-3-5-haiku-20241022", **body},
                                     headers={"anthropic-version": "2023-06-01"} if path == "/v1/messages" else {})
        assert response.status == 200, await response.text()
        assert (await response.json())["model"] == "fake-model"
    async with fake_gateway(FakeServing(build_tokenizer())) as (client, _):
        response = await client.post("/v1/chat/completions", json={**CHAT, "model": "claude-3-5-haiku-20241022"})
        assert response.status == 404


async def test_lmstudio_lists_each_served_name_and_answers_each_by_its_id():
    # Every served name is a model this server answers to (/v1/models and Ollama's /api/tags list each): LM Studio's
    # lists are what its clients pick a model from (an instance per identifier, `lms load --identifier`), and GET
    # /api/v0/models/{id} answers that id. Before, both lists held "qwen-prod" alone and /api/v0/models/gpt-4o
    # answered {"id": "qwen-prod"}.
    async with fake_gateway(FakeServing(build_tokenizer()), served_model_name=NAMES) as (client, _):
        listed = (await (await client.get("/api/v0/models")).json())["data"]
        assert [model["id"] for model in listed] == ["qwen-prod", "gpt-4o", "gpt-4o-mini"]
        assert {model["arch"] for model in listed} == {"qwen3_5"}
        assert (await (await client.get("/api/v0/models/gpt-4o")).json())["id"] == "gpt-4o"
        assert (await client.get("/api/v0/models/gpt-5")).status == 404
        # LM Studio 0.4's list: one model, an instance per identifier (as `lms load --identifier` loads several).
        v1 = (await (await client.get("/api/v1/models")).json())["models"]
        assert [model["key"] for model in v1] == ["qwen-prod"]
        assert [instance["id"] for instance in v1[0]["loaded_instances"]] == ["qwen-prod", "gpt-4o", "gpt-4o-mini"]


async def test_lmstudio_sdk_lists_an_instance_per_served_name_and_predicts_on_each():
    from tests.unit.test_lmstudio_sdk import _channel, _predict, _rpc, _session

    async with fake_gateway(FakeServing(build_tokenizer()), served_model_name=NAMES) as (client, fake):
        ws = await _session(client)
        loaded = (await _rpc(ws, "listLoaded"))["result"]
        assert [(m["identifier"], m["instanceReference"], m["modelKey"]) for m in loaded] == [
            ("qwen-prod", "qwen-prod", "qwen-prod"), ("gpt-4o", "gpt-4o", "qwen-prod"),
            ("gpt-4o-mini", "gpt-4o-mini", "qwen-prod")]
        create = _predict()
        create["creationParameter"]["modelSpecifier"] = {"type": "instanceReference", "instanceReference": "gpt-4o"}
        messages = await _channel(ws, create)
        assert messages[-1]["type"] == "channelClose", messages[-1]
