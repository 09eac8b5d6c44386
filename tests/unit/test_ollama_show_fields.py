"""Ollama's /api/show leaves out a text field with nothing in it (api/types.go ShowResponse: license, modelfile,
parameters, template and system are `omitempty`): a client reads a present "system" as the model's system prompt and
a present "license" as its license text, so the served model, which has neither, sends neither."""
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway


async def _show(servicer: FakeServing) -> dict:
    async with fake_gateway(servicer) as (client, _):
        response = await client.post("/api/show", json={"model": "fake-model"})
        assert response.status == 200
        return await response.json()


async def test_no_license_and_no_system_prompt_are_absent_not_empty():
    body = await _show(FakeServing(build_tokenizer(), max_context_len=2048))
    assert "license" not in body and "system" not in body
    assert list(body)[:3] == ["modelfile", "parameters", "template"]
    assert body["modelfile"].startswith("# Modelfile") and body["template"] and body["parameters"]
    assert body["capabilities"] == ["completion", "tools", "thinking"]


async def test_no_sampling_defaults_leave_parameters_out():
    servicer = FakeServing(build_tokenizer(), max_context_len=2048)
    servicer.generation_config = "{}"
    body = await _show(servicer)
    assert "parameters" not in body and "model_info" in body and "details" in body
