"""End to end: the /v1 parts of the public bug reports (../shared/cases) that need a one-slot stack with 256-token
prefill chunks (C04 chunked-prefill usage, C14 disconnects, a full queue, a dead worker) as tests; the others are in
test_openai_cases.py."""
import time

import httpx
import orjson
import pytest

from tests.e2e.stack import running_gateway
from tests.e2e.test_openai_api import scheduler_load, sse_payloads
from tests.e2e.test_openai_cases import live


@pytest.fixture(scope="module")
def small_stack(make_engine_stack_module):
    """One running and two waiting requests at most, 256-token prefill chunks, with its own gateway. Two waiting:
    an n=2 request sends both choices at once, and with a depth of one the second was refused whenever it arrived
    before the first left the queue (seen once in a full run)."""
    stack = make_engine_stack_module(env={"SPARKINFER_MAX_NUM_BATCHED_TOKENS": "256", "SPARKINFER_MAX_NUM_SEQS": "1",
                                          "SPARKINFER_MAX_QUEUE_DEPTH": "2"})
    # Short keep-alive: a queued stream gets its headers (and a comment) within half a second.
    with running_gateway(stack, {"SPARKINFER_SSE_KEEPALIVE_SECONDS": "0.5"}) as url:
        yield stack, url


@pytest.fixture(scope="module")
def make_engine_stack_module():
    from tests.e2e.stack import EngineStack
    stacks = []

    def make(env):
        stacks.append(EngineStack(env=env))
        return stacks[-1].__enter__()
    yield make
    for stack in stacks:
        stack.close()


def usage_events(events):
    return [e for e in events[:-1] if e.get("usage") is not None]


def check_c04(url):
    prompt = "test " * 1000
    body = {"model": "default", "prompt": prompt, "max_tokens": 1, "temperature": 0}
    with httpx.Client(base_url=url, timeout=120) as http:
        plain = http.post("/v1/completions", json=body).json()
        events = sse_payloads(http.post("/v1/completions", json={**body, "stream": True,
                                                                 "stream_options": {"include_usage": True}}).content)
        usage = usage_events(events)
        assert len(usage) == 1 and usage[0] is events[-2] and usage[0]["choices"] == []
        final = usage[0]["usage"]
        assert final["prompt_tokens"] == plain["usage"]["prompt_tokens"] == http.post(
            "/v1/tokenize", json={"prompt": prompt}).json()["count"]
        assert final["total_tokens"] == final["prompt_tokens"] + final["completion_tokens"]
        assert final["completion_tokens"] <= 1
        assert sum(1 for e in events[:-1] if e["choices"] and e["choices"][0]["text"]) <= final["completion_tokens"]
        bare = sse_payloads(http.post("/v1/completions", json={**body, "stream": True}).content)
        assert all(e.get("usage") is None for e in bare[:-1])
        two = sse_payloads(http.post("/v1/completions", json={**body, "n": 2, "max_tokens": 4, "logprobs": 0,
                                                              "stream": True,
                                                              "stream_options": {"include_usage": True}}).content)
        two_plain = http.post("/v1/completions", json={**body, "n": 2, "max_tokens": 4, "logprobs": 0}).json()
        assert "choices" in two_plain, two_plain
        # The eos that ended a choice is in its logprobs (vLLM), so they count every generated token.
        counted = sum(len(c["logprobs"]["tokens"]) for c in two_plain["choices"])
        assert usage_events(two)[0]["usage"]["completion_tokens"] == two_plain["usage"]["completion_tokens"] == counted
        assert usage_events(two)[0]["usage"]["prompt_tokens"] == final["prompt_tokens"]
        continuous = sse_payloads(http.post("/v1/completions", json={
            **body, "max_tokens": 6, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}).content)
        seen = [e["usage"] for e in usage_events(continuous)]
        assert {u["prompt_tokens"] for u in seen} == {final["prompt_tokens"]}
        assert [u["completion_tokens"] for u in seen] == sorted(u["completion_tokens"] for u in seen)
    return plain["choices"][0]["text"], final


def test_c04_usage_is_exact_with_and_without_chunked_prefill(api_gateway, small_stack):
    assert check_c04(api_gateway) == check_c04(small_stack[1])


def wait_idle(stack, seconds=2.0):
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        load = scheduler_load(stack.grpc_addr)
        if load.num_running == 0 and load.num_waiting == 0:
            return time.monotonic() - start
        time.sleep(0.05)
    load = scheduler_load(stack.grpc_addr)
    raise AssertionError(f"still busy after {seconds} s: running {load.num_running}, waiting {load.num_waiting}")


# ignore_eos: the random tiny model could otherwise end the "long" request after a few tokens.
LONG = {"model": "default", "prompt": "Count from 1 to 5000, one number per line:\n1\n2\n3\n", "max_tokens": 4000,
        "temperature": 0, "ignore_eos": True}


def test_c14_disconnects_free_the_only_slot(small_stack):
    stack, url = small_stack
    with httpx.Client(base_url=url, timeout=30) as session:
        with session.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as running:
            lines = running.iter_lines()
            assert sum(1 for line, _ in zip(lines, range(4)) if line.startswith("data: ")) >= 2
            # A second stream queues behind the only slot; its client leaves before it ever starts.
            with session.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as queued:
                assert queued.status_code == 200
                _wait_load(stack, lambda load: load.num_waiting == 1 and load.num_running == 1)
            _wait_load(stack, lambda load: load.num_waiting == 0 and load.num_running == 1)
    wait_idle(stack)
    started = time.monotonic()
    probe = httpx.post(f"{url}/v1/completions", json={"model": "default", "prompt": "Hi", "max_tokens": 8}, timeout=10)
    assert probe.status_code == 200 and time.monotonic() - started < 5.0


def _wait_load(stack, condition, seconds: float = 2.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition(scheduler_load(stack.grpc_addr)):
        assert time.monotonic() < deadline, f"scheduler load never matched: {scheduler_load(stack.grpc_addr)}"
        time.sleep(0.02)


def test_c14_non_streamed_client_timeout_frees_the_slot(small_stack):
    stack, url = small_stack
    _give_up_after(url, LONG, 1.0)
    wait_idle(stack)
    live(httpx.Client(base_url=url, timeout=10))


def _give_up_after(url, body, seconds):
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{url}/v1/completions", content=orjson.dumps(body), timeout=seconds,
                   headers={"Content-Type": "application/json"})


def test_queue_full_is_429_with_retry_after(small_stack):
    stack, url = small_stack
    with httpx.Client(base_url=url, timeout=30) as session:
        with session.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as running:
            # Keep the line iterator referenced: closing it would close (disconnect) this stream.
            lines = running.iter_lines()
            assert next(line for line in lines if line.startswith("data: "))
            with session.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as queued, \
                    session.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as queued_too:
                assert queued.status_code == queued_too.status_code == 200
                _wait_load(stack, lambda load: load.num_waiting == 2, seconds=10.0)
                refused = session.post("/v1/chat/completions", timeout=10,
                                       json={"model": "default", "messages": [{"role": "user", "content": "hi"}]})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    error = refused.json()["error"]
    assert error["type"] == "rate_limit_error" and error["code"] == "server_overloaded" and error["message"]
    wait_idle(stack)
    live(httpx.Client(base_url=url, timeout=10))


def test_dead_worker_is_503_then_recovers(small_stack):
    stack, url = small_stack
    stack.kill_worker()
    deadline = time.monotonic() + 5.0
    while scheduler_load(stack.grpc_addr).worker_alive and time.monotonic() < deadline:
        time.sleep(0.05)
    response = httpx.post(f"{url}/v1/completions", json={"model": "default", "prompt": "Hi", "max_tokens": 4},
                          timeout=10)
    assert response.status_code == 503 and response.json()["error"]["type"] == "server_unavailable"
    health = httpx.get(f"{url}/health", timeout=5)
    assert health.status_code == 503 and health.json()["reason"] == "worker_down"
    stack.start_worker()
    stack.wait_serving()
    live(httpx.Client(base_url=url, timeout=10))
