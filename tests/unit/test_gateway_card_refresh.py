"""Unit tests (fake scheduler): an engine that comes back from an outage with another model card (a worker whose KV pool
caps the context lower, another checkpoint) is served with that card. The gateway fetched the card once and kept it
for its lifetime: /v1/models and every length check kept the old context, and a request for the new model was a 404,
until the gateway was restarted."""
import grpc
import orjson
import pytest


USER = [{"role": "user", "content": "hi"}]


async def _worker_lost_seen_by_health(client, fake) -> None:
    fake.worker_alive = False
    response = await client.get("/health")
    assert response.status == 503 and (await response.json())["reason"] == "worker_down"
    fake.worker_alive = True


async def _worker_lost_seen_by_a_request(client, fake) -> None:
    fake.script.error, fake.script.error_details = grpc.StatusCode.UNAVAILABLE, "no worker is connected"
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "max_tokens": 2}))
    assert response.status == 503
    fake.script.error = None


@pytest.mark.parametrize("outage", [_worker_lost_seen_by_health, _worker_lost_seen_by_a_request],
                         ids=["health probe", "failed request"])
async def test_the_context_of_the_engine_that_came_back_is_served(fake, outage):
    client, fake = fake
    models = await (await client.get("/v1/models")).json()
    assert models["data"][0]["max_model_len"] == 2048
    await outage(client, fake)
    fake.max_context_len = 1024          # the worker came back with a smaller KV pool
    models = await (await client.get("/v1/models")).json()
    assert models["data"][0]["max_model_len"] == 1024
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, "max_tokens": 1500}))
    error = (await response.json())["error"]
    assert response.status == 400 and error["code"] == "context_length_exceeded"
    assert error["message"].startswith("This model's maximum context length is 1024 tokens.")


async def test_an_unchanged_card_is_not_parsed_again(fake, monkeypatch):
    client, fake = fake
    assert (await client.get("/v1/models")).status == 200
    await _worker_lost_seen_by_health(client, fake)
    from gateway.model import ModelCard
    monkeypatch.setattr(ModelCard, "from_info", classmethod(lambda cls, info: pytest.fail("parsed again")))
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "max_tokens": 2}))
    assert response.status == 200 and (await response.json())["usage"]["completion_tokens"] == 2
