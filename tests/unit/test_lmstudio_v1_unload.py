"""LM Studio's POST /api/v1/models/unload (lmstudio.ai/docs/developer/rest/unload: {instance_id} -> {instance_id}) of
the served instance: the model stays in memory, but LM Studio's model lists report it unloaded (/api/v1/models with no
loaded_instances, /api/v0/models state "not-loaded") until a load or a request loads it again (LM Studio's JIT load),
as Ollama's keep_alive 0 does for /api/ps. It was a 501, which ended scripts and tools that unload a model when they
are done with it or before loading the next."""
import pytest


async def _listed(client) -> tuple:
    v1 = (await (await client.get("/api/v1/models")).json())["models"][0]["loaded_instances"]
    v0 = (await (await client.get("/api/v0/models")).json())["data"][0]["state"]
    return len(v1), v0


async def _unload(client) -> None:
    response = await client.post("/api/v1/models/unload", json={"instance_id": "fake-model"})
    assert (response.status, await response.json()) == (200, {"instance_id": "fake-model"})


async def test_an_unloaded_model_is_listed_as_not_loaded(fake):
    client, _ = fake
    assert await _listed(client) == (1, "loaded")
    await _unload(client)
    assert await _listed(client) == (0, "not-loaded")


@pytest.mark.parametrize("path, body", [
    ("/api/v1/models/load", {"model": "fake-model"}),
    ("/api/v1/chat", {"model": "fake-model", "input": "hi", "max_output_tokens": 2}),
    ("/api/v0/chat/completions", {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}],
                                  "max_tokens": 2}),
], ids=["load", "v1-chat", "v0-chat"])
async def test_a_load_or_a_request_loads_it_again(fake, path, body):
    client, _ = fake
    await _unload(client)
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    assert await _listed(client) == (1, "loaded")


async def test_the_download_status_lists_no_job(fake):
    """GET /api/v1/models/download/status (docs developer/rest/download-status): LM Studio's four job lists, empty here
    (a download of the served model answers already_downloaded with no job_id); one job's status is a 404. The list
    was a 501, which a client polling its downloads read as a failure."""
    client, _ = fake
    response = await client.get("/api/v1/models/download/status")
    assert (response.status, await response.json()) == (
        200, {"downloading": [], "completed": [], "failed": [], "paused": []})
    response = await client.get("/api/v1/models/download/status/job_493c7c9ded")
    error = (await response.json())["error"]
    assert (response.status, error["param"], error["code"]) == (404, "job_id", "job_not_found")


async def test_a_chat_that_loads_the_model_says_so_as_lm_studio_does(fake):
    """A chat with the model listed unloaded is LM Studio's JIT load: its stream sends model_load.start and
    model_load.end, and its stats carry model_load_time_seconds, present only then (docs developer/rest
    streaming-events, chat.md); a chat with the model loaded has neither."""
    client, _ = fake
    body = {"model": "fake-model", "input": "hi", "max_output_tokens": 2}
    answer = await (await client.post("/api/v1/chat", json=body)).json()
    assert "model_load_time_seconds" not in answer["stats"]
    await _unload(client)
    answer = await (await client.post("/api/v1/chat", json=body)).json()
    assert answer["stats"]["model_load_time_seconds"] == 0.0
    await _unload(client)
    raw = (await (await client.post("/api/v1/chat", json={**body, "stream": True})).read()).decode()
    kinds = [line[7:] for line in raw.splitlines() if line.startswith("event: ")]
    assert kinds[:4] == ["chat.start", "model_load.start", "model_load.end", "prompt_processing.start"]
    assert '"model_load_time_seconds":0.0' in raw.split("event: chat.end")[1]
    raw = (await (await client.post("/api/v1/chat", json={**body, "stream": True})).read()).decode()
    assert "model_load" not in raw
