"""Unit tests: a choice that fails once admitted (the worker lost mid-generation) is counted once in the gateway's
request_success_total{finished_reason="error"} (vLLM's FinishReason.ERROR: the server failed it, its client did not
abort it) and e2e latency histogram, as the scheduler counts it; a refused
request (429) counts in neither. Failed choices were in neither, so the gateway's totals fell short of the
scheduler's by every request a worker loss failed."""
import grpc
import orjson
import pytest

from gateway import metrics
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TOKENIZER = build_tokenizer()
USER = [{"role": "user", "content": "hi"}]
ROUTES = {
    "chat": ("/v1/chat/completions", {"messages": USER, "max_tokens": 50}),
    "ollama": ("/api/chat", {"model": "fake-model", "messages": USER, "options": {"num_predict": 50}}),
    "anthropic": ("/v1/messages", {"model": "fake-model", "messages": USER, "max_tokens": 50}),
}


class WorkerLost(FakeServing):
    """Admits every call, sends 3 tokens, then fails it UNAVAILABLE as the scheduler fails a lost worker's requests
    (choice `lost_choice` only, when set; the others run to their end)."""

    lost_choice = None

    async def Generate(self, request, context):
        num_sent = 0
        async for message in super().Generate(request, context):
            lost = self.lost_choice is None or request.req_id.endswith(f"-{self.lost_choice}")
            if lost and num_sent == 3:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "worker w1 stopped answering; the request was "
                                                                 "aborted")
            num_sent += 1
            yield message


def worker_lost() -> WorkerLost:
    fake = WorkerLost(TOKENIZER, max_context_len=2048)
    fake.script.reply, fake.script.delay_s = "Hello world " * 20, 0.01
    return fake


@pytest.fixture
async def stack():
    async with fake_gateway(worker_lost()) as pair:
        yield pair


def counts() -> tuple:
    value = metrics.REGISTRY.get_sample_value
    return (value("sparkinfer_gateway_request_success_total", {"finished_reason": "abort"}) or 0.0,
            value("sparkinfer_gateway_request_success_total", {"finished_reason": "error"}) or 0.0,
            value("sparkinfer_gateway_e2e_request_latency_seconds_count") or 0.0,
            value("sparkinfer_gateway_requests_in_flight") or 0.0)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("route", list(ROUTES))
async def test_a_choice_failed_by_a_lost_worker_is_counted_once_as_error(stack, route, stream):
    client, _ = stack
    path, body = ROUTES[route]
    aborts, errors, e2e, in_flight = counts()
    response = await client.post(path, data=orjson.dumps({**body, "stream": stream}))
    raw = await response.read()
    assert b"stopped answering" in raw and (response.status == 200 if stream else response.status == 503)
    assert counts() == (aborts, errors + 1, e2e + 1, in_flight)


async def test_n_choices_with_one_failed_count_each_choice_once(stack):
    client, fake = stack
    fake.lost_choice = 1
    aborts, errors, e2e, in_flight = counts()
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, "max_tokens": 50,
                                                                            "n": 2}))
    assert response.status == 503 and "stopped answering" in orjson.loads(await response.read())["error"]["message"]
    # The failed choice (an error), and its sibling cancelled with the request (an abort).
    assert counts() == (aborts + 1, errors + 1, e2e + 2, in_flight)


async def test_a_refused_request_is_no_finished_request(stack):
    client, fake = stack
    fake.script.error = grpc.StatusCode.RESOURCE_EXHAUSTED
    before = counts()
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, "stream": True}))
    assert response.status == 429 and orjson.loads(await response.read())["error"]["code"] == "server_overloaded"
    assert counts() == before
