"""Ollama's routes take every SPARKINFER_SERVED_MODEL_NAME name, as /v1 does since 79f18ea (vLLM's several
--served-model-name names): Ollama lists and serves each name a model has (`ollama cp` names share one model: each its
own /api/tags entry with the same digest), so an Ollama client set up with an alias found it neither listed nor
served (fake scheduler)."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

NAMES = "qwen-prod, gpt-4o"
HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("name", ["gpt-4o", "GPT-4o:latest", "library/gpt-4o", "qwen-prod"])
async def test_an_alias_is_served_on_api_chat_and_generate(name):
    async with fake_gateway(FakeServing(build_tokenizer()), served_model_name=NAMES) as (client, _):
        body = {"model": name, "stream": False, "options": {"num_predict": 2}}
        chat = await client.post("/api/chat", json={**body, "messages": HI})
        generate = await client.post("/api/generate", json={**body, "prompt": "hi"})
        for response in (chat, generate):
            answer = await response.json()
            # Before: 404 {"error": "model 'gpt-4o' not found"}.
            assert response.status == 200, answer
            assert answer["model"] == name and answer["done"] is True and answer["eval_count"] == 2


async def test_tags_list_each_name_and_show_pull_take_an_alias():
    async with fake_gateway(FakeServing(build_tokenizer()), served_model_name=NAMES) as (client, _):
        models = (await (await client.get("/api/tags")).json())["models"]
        assert [model["name"] for model in models] == ["qwen-prod:latest", "gpt-4o:latest"]
        assert [model["model"] for model in models] == ["qwen-prod:latest", "gpt-4o:latest"]
        assert len({model["digest"] for model in models}) == 1 and len({model["size"] for model in models}) == 1
        show = await client.post("/api/show", json={"model": "gpt-4o:latest"})
        assert show.status == 200 and "completion" in (await show.json())["capabilities"]
        pull = await client.post("/api/pull", json={"model": "gpt-4o", "stream": False})
        assert (pull.status, await pull.json()) == (200, {"status": "success"})
        missing = await client.post("/api/chat", json={"model": "gpt-5", "messages": HI, "stream": False})
        assert (missing.status, await missing.json()) == (404, {"error": "model 'gpt-5' not found"})
