"""The gateway over a scheduler whose checkpoint has a chat template (or tokenizer.json) it cannot load: /health and
every route answer 503 `model_unloadable` naming the fault, logged once; it was a 500 with a traceback on each request
and each /health probe, so `make run` waited its whole start-up timeout (600 s) printing tracebacks."""
import logging

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

BROKEN = "{% for message in messages %}{{ message.content }"
DETAIL = ("the model 'fake-model' cannot be served: its tokenizer.json or chat template does not load "
          "(TemplateSyntaxError: unexpected '}')")


@pytest.fixture
async def broken():
    async with fake_gateway(FakeServing(build_tokenizer(), template=BROKEN)) as pair:
        yield pair[0]


async def test_health_says_the_model_cannot_be_served(broken):
    response = await broken.get("/health")
    assert response.status == 503
    assert orjson.loads(await response.read()) == {"status": "unhealthy", "reason": "model_unloadable",
                                                   "detail": DETAIL, "error": {"code": 503, "message": DETAIL,
                                                                               "type": "unavailable_error"}}


@pytest.mark.parametrize("path, body, error", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]},
     {"error": {"message": DETAIL, "type": "server_unavailable", "param": None, "code": "model_unloadable"}}),
    ("/api/chat", {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}, {"error": DETAIL}),
], ids=["openai", "ollama"])
async def test_requests_get_503_in_the_route_shape(broken, path, body, error):
    response = await broken.post(path, data=orjson.dumps(body))
    assert response.status == 503
    assert orjson.loads(await response.read()) == error


async def test_the_fault_is_logged_once_without_a_traceback(caplog):
    with caplog.at_level(logging.INFO, logger="gateway"):
        async with fake_gateway(FakeServing(build_tokenizer(), template=BROKEN)) as (client, _):
            for _ in range(3):
                assert (await client.get("/health")).status == 503
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert [record.getMessage() for record in errors] == [DETAIL]
    assert all(record.exc_info is None for record in errors)
