"""Ollama's load request (POST /api/generate with no prompt, /api/chat with no messages, /api/embed and
/api/embeddings with nothing to embed) answers "loaded" only when the model can generate: Ollama's handlers answer it
after scheduleRunner has the runner and its error otherwise (server/routes.go GenerateHandler, ChatHandler,
EmbedHandler), and `ollama run` preloads so (cmd/cmd.go loadOrUnloadModel) and reports that error. With the worker
dead it answered 200 "load" while /api/ps listed nothing and the first chat got the 503."""
import orjson
import pytest

LOADS = [("/api/generate", {"model": "fake-model"}), ("/api/chat", {"model": "fake-model", "messages": []}),
         ("/api/embed", {"model": "fake-model"}), ("/api/embeddings", {"model": "fake-model"})]
NO_WORKER = "the model server is unavailable: no worker is connected to the scheduler"
DRAINING = "the model server is unavailable: the scheduler is shutting down and takes no new requests"


async def _post(client, path: str, body: dict):
    response = await client.post(path, data=orjson.dumps(body))
    return response, orjson.loads(await response.read())


@pytest.mark.parametrize("path,body", LOADS)
async def test_a_load_while_no_worker_runs_is_the_503_a_generation_gets(stack, path, body):
    client, fake = stack
    fake.worker_alive = False
    response, answer = await _post(client, path, body)
    assert (response.status, answer) == (503, {"error": NO_WORKER})
    assert response.headers["Retry-After"] == "1"
    fake.worker_alive = True
    response, answer = await _post(client, path, body)
    assert response.status == 200
    assert answer.get("done_reason", "load") == "load" and "error" not in answer


@pytest.mark.parametrize("path,body", LOADS[:2])
async def test_an_unload_while_no_worker_runs_still_answers_unload(stack, path, body):
    client, fake = stack
    fake.worker_alive = False
    response, answer = await _post(client, path, {**body, "keep_alive": 0})
    assert response.status == 200 and answer["done_reason"] == "unload"


async def test_a_load_and_the_slot_probe_while_the_scheduler_drains_are_its_503(stack):
    """A draining scheduler refuses every new request (503 on each API); a load (Ollama's, LM Studio's) or a
    balancer's slot probe said the model was ready for them."""
    client, fake = stack
    fake.load_fields = {"draining": True}
    response, answer = await _post(client, "/api/generate", {"model": "fake-model"})
    assert (response.status, answer) == (503, {"error": DRAINING})
    response = await client.get("/slots?fail_on_no_slot=1")
    assert (response.status, await response.json()) == (503, {"error": {
        "code": 503, "message": DRAINING, "type": "unavailable_error"}})
    response = await client.post("/api/v1/models/load", data=orjson.dumps({"model": "fake-model"}))
    assert (response.status, (await response.json())["error"]["message"]) == (503, DRAINING)
