"""/v1/models (and llama.cpp's /models) entries carry llama-server's `meta` (tools/server server-context model_meta /
engine_model_info): llama.cpp clients size their prompts and report the model from data[0].meta.n_ctx_train, n_ctx,
n_vocab, n_embd and n_params, several indexing it without a fallback, so the vLLM-shaped entry alone failed them."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway


@pytest.mark.parametrize("path", ["/v1/models", "/models", "/v1/models/fake-model"])
async def test_each_model_entry_has_llama_servers_meta(path):
    serving = FakeServing(build_tokenizer(), max_context_len=2048)
    config = orjson.loads(serving.config)
    config["text_config"]["max_position_embeddings"] = 262144
    serving.config = orjson.dumps(config).decode()
    async with fake_gateway(serving) as (client, _):
        response = await client.get(path)
        body = await response.json()
    entry = body if path.endswith("fake-model") else body["data"][0]
    assert response.status == 200 and entry["max_model_len"] == 2048
    # n_ctx is the window served, n_ctx_train the checkpoint's; the weights' bytes from the bf16 parameter count
    assert entry["meta"] == {"vocab_type": 2, "n_vocab": serving.tokenizer.get_vocab_size(with_added_tokens=True),
                             "n_ctx": 2048, "n_ctx_train": 262144, "n_embd": 64, "n_params": 1000, "size": 2000}


async def test_a_config_without_a_trained_length_reports_the_served_one():
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=512)) as (client, _):
        meta = (await (await client.get("/v1/models")).json())["data"][0]["meta"]
    assert (meta["n_ctx"], meta["n_ctx_train"]) == (512, 512)


@pytest.mark.parametrize("path", ["/v1/models", "/models"])
async def test_the_list_has_llama_servers_ollama_shaped_models_beside_data(path):
    """llama-server answers its model list with a `models` array beside `data` (server-context engine_models), and
    clients read the model's name from it (abdulmominsakib/localmind#11 takes models[].name off llama-server)."""
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048)) as (client, _):
        body = await (await client.get(path)).json()
    assert [entry["id"] for entry in body["data"]] == ["fake-model"] and body["object"] == "list"
    assert body["models"] == [{
        "name": "fake-model", "model": "fake-model", "modified_at": "", "size": "", "digest": "", "type": "model",
        "description": "", "tags": [""], "capabilities": ["completion"], "parameters": "",
        "details": {"parent_model": "", "format": "safetensors", "family": "qwen3_5", "families": ["qwen3_5"],
                    "parameter_size": "1K", "quantization_level": "BF16"}}]


async def test_llama_servers_model_list_needs_no_key_where_vllms_does():
    """llama-server answers /models without the API key (server-http.cpp: its public endpoints are /health,
    /v1/health, /models, /v1/models and /), so a readiness probe or model picker that sends none lists the model;
    /v1/models keeps vLLM's key check (its middleware guards every /v1 route)."""
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048), api_key="s3cret") as (client, _):
        public = await client.get("/models")
        keyed = await client.get("/v1/models")
        with_key = await client.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
        assert public.status == 200 and [entry["id"] for entry in (await public.json())["data"]] == ["fake-model"]
        assert (keyed.status, with_key.status) == (401, 200)
