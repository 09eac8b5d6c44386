"""Ollama's /api/show for VS Code's Copilot Chat (server/routes.go ShowHandler, its tests
TestShowCopilotUserAgentOverwritesExistingBasename): Copilot labels a model with model_info's general.basename, so to a
User-Agent starting "GitHubCopilotChat/" Ollama gives the name the request asked for there; to any other client the
checkpoint's basename."""
import pytest

COPILOT = "GitHubCopilotChat/0.41.1"


@pytest.mark.parametrize("field, sent", [("model", "fake-model:latest"), ("name", "FAKE-MODEL"),
                                         ("model", "library/fake-model")], ids=["tag", "name-field", "namespace"])
async def test_copilot_chat_gets_the_requested_name_as_basename(fake, field, sent):
    client, _ = fake
    async def show(user_agent: str) -> dict:
        return await (await client.post("/api/show", json={field: sent}, headers={"User-Agent": user_agent})).json()

    copilot, other = await show(COPILOT), await show("ollama-python/0.6")
    assert copilot["model_info"]["general.basename"] == sent
    assert other["model_info"]["general.basename"] == "fake-model"
    # Only the basename differs.
    copilot["model_info"].pop("general.basename"), other["model_info"].pop("general.basename")
    assert {k: v for k, v in copilot.items() if k != "modified_at"} == {k: v for k, v in other.items()
                                                                          if k != "modified_at"}
