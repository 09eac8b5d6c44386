"""GET /api/experimental/model-recommendations, which `ollama launch` (cmd/launch/launch.go requestRecommendations)
and Ollama's VS Code extension (ollama-vscode src/provider.ts fetchModelRecommendations) call each time they list
models: Ollama always answers it (server/routes.go ModelRecommendationsExperimentalHandler, api.ModelRecommendation).
Here it names the served model, as those clients match it to the installed one, where a 404 had them fall back to
Ollama's built-in picks, models this server cannot pull."""
import asyncio

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.model import ModelCard
from gateway.ollama_models import recommendation


def _launch_key(name: str) -> str:
    """The name `ollama launch` gives an installed model before it looks it up among the recommendations."""
    return name.removesuffix(":latest")


async def test_the_served_model_is_the_recommendation_clients_match_to_the_installed_one(stack):
    client, servicer = stack
    response = await client.get("/api/experimental/model-recommendations")
    assert response.status == 200 and response.headers["Content-Type"] == "application/json; charset=utf-8"
    answer = await response.json()
    tags = (await (await client.get("/api/tags")).json())["models"]
    assert [_launch_key(rec["model"]) for rec in answer["recommendations"]] == [_launch_key(m["name"]) for m in tags]
    # `ollama launch` adds a recommendation it finds no installed model for as "(not downloaded)": none is here.
    assert answer["recommendations"][0]["model"] == _launch_key(tags[0]["name"])
    assert answer["recommendations"][0]["context_length"] == tags[0]["details"]["context_length"]
    assert answer["recommendations"][0]["description"]
    assert not servicer.script.requests


async def test_head_answers_as_get_does(stack):
    client, _ = stack
    assert (await client.head("/api/experimental/model-recommendations")).status == 200


@pytest.fixture(scope="module")
def card() -> ModelCard:
    return ModelCard.from_info(asyncio.run(FakeServing(build_tokenizer(), max_context_len=2048).Info(None, None)))


@pytest.mark.parametrize("served, model", [("qwen", "qwen"), ("qwen:latest", "qwen"), ("qwen:27b", "qwen:27b"),
                                           ("library/qwen:27b", "library/qwen:27b")],
                         ids=["bare", "latest", "tagged", "namespaced"])
def test_a_tag_other_than_latest_is_kept(card, served, model):
    assert recommendation(card, served) == {"model": model, "description": "The model this server serves",
                                            "context_length": 2048}
