"""LM Studio /api/v1: a loaded instance's config carries the load fields LM Studio documents for an LLM that apply here
(lmstudio-ai/docs 1_developer/2_rest list.md loaded_instances[].config: context_length, parallel,
offload_kv_cache_to_gpu, ...; load.md load_config), not context_length alone: clients size their concurrency on
`parallel` and audit the loaded config key by key (a missing key reads as a misconfigured load)."""
import pytest


async def _instance(client) -> dict:
    models = (await (await client.get("/api/v1/models")).json())["models"]
    assert len(models) == 1 and len(models[0]["loaded_instances"]) == 1
    return models[0]["loaded_instances"][0]


@pytest.mark.parametrize("device, seqs, on_gpu", [("cpu", 3, False), ("cuda:0 (fake)", 48, True)])
async def test_a_loaded_instance_reports_its_parallel_predictions_and_kv_cache_place(fake, device, seqs, on_gpu):
    client, servicer = fake
    servicer.device, servicer.max_num_seqs = device, seqs
    instance = await _instance(client)
    assert instance["id"] == "fake-model"
    assert instance["config"] == {"context_length": 2048, "parallel": seqs, "offload_kv_cache_to_gpu": on_gpu}
    # The same facts as the server's other surfaces give them: llama-server's slots, Ollama's size_vram.
    assert (await (await client.get("/props")).json())["total_slots"] == instance["config"]["parallel"]
    ps = (await (await client.get("/api/ps")).json())["models"][0]
    assert (ps["size_vram"] > 0) is instance["config"]["offload_kv_cache_to_gpu"]


async def test_echo_load_config_gives_the_load_fields_that_applied(fake):
    client, servicer = fake
    servicer.device = "cpu"
    response = await client.post("/api/v1/models/load", json={"model": "fake-model", "echo_load_config": True})
    answer = await response.json()
    assert response.status == 200, answer
    # load.md's load_config has no parallel (a load does not set it); the rest is the listed instance's config.
    assert answer["load_config"] == {"context_length": 2048, "offload_kv_cache_to_gpu": False}
    assert {**answer["load_config"], "parallel": servicer.max_num_seqs} == (await _instance(client))["config"]


async def test_a_scheduler_that_names_no_device_leaves_the_kv_cache_place_out(fake):
    client, servicer = fake
    servicer.device = ""
    assert "offload_kv_cache_to_gpu" not in (await _instance(client))["config"]
