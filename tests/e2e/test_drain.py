"""End to end: SIGTERM on a gateway (a scale-down, a rolling update, `docker compose stop`) drains it: the port closes
at once, the requests in flight finish, then it exits 0; past SPARKINFER_DRAIN_GRACE_S what is left ends with a 503 (a
stream with its error event) and is freed in the scheduler. Before, every stream in flight was cut mid-body and every
non-streamed request got no response at all."""
import http.client
import json
import signal
import subprocess
import threading
import time

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2

from tests.e2e.stack import GatewayProcess
from tests.e2e.test_finish_reason import wait_for
from tests.e2e.test_openai_api import scheduler_load, sse_payloads

NUM_TOKENS = 120
SERVING = health_pb2.HealthCheckResponse.SERVING
CHAT = {"model": "default", "messages": [{"role": "user", "content": "count"}], "max_tokens": NUM_TOKENS,
        "ignore_eos": True, "temperature": 0}


class Call(threading.Thread):
    """One request on its own thread: `status`, `content` (bytes) once done, `error` when the connection broke;
    `answering` is set once the first bytes of the body arrived (a stream's first event)."""

    def __init__(self, url: str, body: dict):
        super().__init__(daemon=True)
        self.url, self.body = url, body
        self.status = self.content = self.error = None
        self.answering = threading.Event()
        self.start()

    def run(self) -> None:
        try:
            with httpx.stream("POST", f"{self.url}/v1/chat/completions", json=self.body, timeout=120) as response:
                self.status, chunks = response.status_code, []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    self.answering.set()
                self.content = b"".join(chunks)
        except httpx.HTTPError as exc:
            self.error = exc


def _refused(url: str) -> bool:
    try:
        httpx.get(f"{url}/health", timeout=2)
    except httpx.ConnectError:
        return True
    return False


def _not_serving(stack) -> bool:
    try:
        return stack.health() != SERVING
    except grpc.RpcError:
        return True


@pytest.fixture
def gateway_over(engine_stack):
    gateways = []

    def start(env=None) -> GatewayProcess:
        gateways.append(GatewayProcess(engine_stack, env))
        gateways[-1].wait_ready()
        return gateways[-1]
    yield start
    for gateway in gateways:
        gateway.close()


def test_sigterm_lets_the_requests_in_flight_finish(engine_stack, gateway_over):
    gateway = gateway_over()
    streamed, plain = Call(gateway.url, {**CHAT, "stream": True}), Call(gateway.url, CHAT)
    wait_for(lambda: scheduler_load(engine_stack.grpc_addr).num_running == 2, 10)
    gateway.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: _refused(gateway.url), 5)
    assert gateway.proc.wait(timeout=60) == 0
    streamed.join(10)
    plain.join(10)
    assert streamed.error is None and plain.error is None, (streamed.error, plain.error)
    assert streamed.status == plain.status == 200
    events = sse_payloads(streamed.content)
    assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "length"
    answer = httpx.Response(200, content=plain.content).json()
    assert answer["choices"][0]["finish_reason"] == "length" and answer["usage"]["completion_tokens"] == NUM_TOKENS


def test_past_the_drain_grace_the_rest_ends_with_a_503_and_is_freed(engine_stack, gateway_over):
    gateway = gateway_over({"SPARKINFER_DRAIN_GRACE_S": "0.5"})
    endless = Call(gateway.url, {**CHAT, "max_tokens": 4000, "stream": True})
    plain = Call(gateway.url, {**CHAT, "max_tokens": 4000})
    wait_for(lambda: scheduler_load(engine_stack.grpc_addr).num_running == 2, 10)
    wait_for(endless.answering.is_set, 30)
    gateway.proc.send_signal(signal.SIGTERM)
    try:
        assert gateway.proc.wait(timeout=10) == 0
    except subprocess.TimeoutExpired:
        pytest.fail("the gateway outlived its drain grace by 10 s")
    wait_for(lambda: scheduler_load(engine_stack.grpc_addr).num_running == 0, 5)
    endless.join(10)
    plain.join(10)
    # Each ends in its own form: the stream with its error event, the answer not sent yet with the 503.
    assert endless.error is None and endless.status == 200, endless.error
    events = sse_payloads(endless.content)
    assert events[-1] == "[DONE]" and events[-2]["error"]["code"] == "server_unavailable"
    assert "shutting down" in events[-2]["error"]["message"]
    assert plain.error is None and plain.status == 503, plain.error
    assert "shutting down" in httpx.Response(503, content=plain.content).json()["error"]["message"]


def test_an_answer_sent_while_draining_closes_its_connection(engine_stack, gateway_over):
    """An answer the gateway sends after its SIGTERM says Connection: close, as uvicorn (vLLM) and Go's net/http
    (Ollama) do while they shut down: without it the client kept the connection for its next request, which the
    closing gateway dropped (a broken pipe instead of an answer, or a refused connection it could retry elsewhere)."""
    gateway = gateway_over()
    client = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=60)
    try:
        # Long enough (seconds) that the answer is still being generated when the signal lands.
        client.request("POST", "/v1/chat/completions", body=json.dumps({**CHAT, "max_tokens": 600}),
                       headers={"Content-Type": "application/json"})
        wait_for(lambda: scheduler_load(engine_stack.grpc_addr).num_running == 1, 10)
        gateway.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: _refused(gateway.url), 5)
        answer = client.getresponse()
        body = json.loads(answer.read())
    finally:
        client.close()
    assert answer.status == 200 and body["usage"]["completion_tokens"] == 600
    assert answer.getheader("Connection") == "close"
    assert gateway.proc.wait(timeout=60) == 0


def test_a_second_signal_ends_the_drain_at_once(engine_stack, gateway_over):
    """Ctrl-C twice, or a second SIGTERM: the scheduler and the worker stop at once on it, and uvicorn under vLLM
    force-exits, but the gateway ignored it and drained on for all of SPARKINFER_DRAIN_GRACE_S. Now what still runs
    gets its 503 (a stream its error event) saying why, and the gateway exits 0 long before its grace would end."""
    gateway = gateway_over({"SPARKINFER_DRAIN_GRACE_S": "300"})
    endless = Call(gateway.url, {**CHAT, "max_tokens": 4000, "stream": True})
    plain = Call(gateway.url, {**CHAT, "max_tokens": 4000})
    wait_for(lambda: scheduler_load(engine_stack.grpc_addr).num_running == 2, 10)
    wait_for(endless.answering.is_set, 30)  # its 200 and first event sent (a loaded host may take a while)
    gateway.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: _refused(gateway.url), 5)
    gateway.proc.send_signal(signal.SIGTERM)
    try:
        assert gateway.proc.wait(timeout=60) == 0
    except subprocess.TimeoutExpired:
        pytest.fail("the second signal did not end the gateway's 300 s drain")
    endless.join(10)
    plain.join(10)
    why = "the server is shutting down: a second stop signal ended the drain before the request finished"
    events = sse_payloads(endless.content)
    assert endless.status == 200 and events[-1] == "[DONE]"
    assert events[-2]["error"] == {"message": why, "type": "server_unavailable", "param": None,
                                   "code": "server_unavailable"}
    assert plain.status == 503 and why in httpx.Response(503, content=plain.content).json()["error"]["message"]
    wait_for(lambda: scheduler_load(engine_stack.grpc_addr).num_running == 0, 5)


def test_sigterm_on_the_engine_lets_its_requests_finish(make_engine_stack):
    """SIGTERM reaches scheduler and worker together (a rolling update of the engine Pod, `make run`'s stop): the
    scheduler turns NOT_SERVING and refuses new requests with 503 in the API's shape, the admitted ones run to their
    end on the worker, which serves until the scheduler is gone; both exit 0. Before, the scheduler cut every request
    after 1 s ("Cancelling all calls") and the worker died at once."""
    stack = make_engine_stack()
    gateway = GatewayProcess(stack)
    try:
        gateway.wait_ready()
        streamed, plain = Call(gateway.url, {**CHAT, "stream": True}), Call(gateway.url, CHAT)
        wait_for(lambda: scheduler_load(stack.grpc_addr).num_running == 2, 10)
        stack.scheduler.send_signal(signal.SIGTERM)
        stack.worker.send_signal(signal.SIGTERM)
        wait_for(lambda: _not_serving(stack), 5)
        refused = httpx.post(f"{gateway.url}/v1/chat/completions", json={**CHAT, "max_tokens": 2}, timeout=10)
        anthropic = httpx.post(f"{gateway.url}/v1/messages", json={**CHAT, "max_tokens": 2}, timeout=10)
        assert stack.scheduler.wait(timeout=60) == 0 and stack.worker.wait(timeout=10) == 0
        streamed.join(10)
        plain.join(10)
    finally:
        gateway.close()
    assert refused.status_code == 503 and refused.json()["error"]["message"] == (
        "the model server is unavailable: the scheduler is shutting down and takes no new requests")
    assert anthropic.status_code == 503 and anthropic.json()["error"]["type"] == "overloaded_error"
    assert streamed.status == plain.status == 200, (streamed.error, plain.error)
    events = sse_payloads(streamed.content)
    assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "length"
    answer = httpx.Response(200, content=plain.content).json()
    assert answer["choices"][0]["finish_reason"] == "length" and answer["usage"]["completion_tokens"] == NUM_TOKENS


def test_past_the_engine_grace_a_stream_ends_saying_why(make_engine_stack):
    """The scheduler's grace over, the requests it cuts end with the reason (measured on a stack on port 8230: the
    stream's error event said "the model server is unavailable: Cancelling all calls", gRPC's words for its stop)."""
    stack = make_engine_stack(env={"SPARKINFER_DRAIN_GRACE_S": "0.5"})
    gateway = GatewayProcess(stack)
    try:
        gateway.wait_ready()
        endless = Call(gateway.url, {**CHAT, "max_tokens": 4000, "stream": True})
        wait_for(lambda: scheduler_load(stack.grpc_addr).num_running == 1, 10)
        wait_for(endless.answering.is_set, 30)
        stack.scheduler.send_signal(signal.SIGTERM)
        assert stack.scheduler.wait(timeout=30) == 0
        endless.join(10)
    finally:
        gateway.close()
    assert endless.error is None and endless.status == 200, endless.error
    events = sse_payloads(endless.content)
    assert events[-1] == "[DONE]" and events[-2]["error"]["message"] == (
        "the model server is unavailable: the scheduler is shutting down and cut the request before it finished "
        "(drain grace 0.5 s, SPARKINFER_DRAIN_GRACE_S)")


def test_a_sigtermed_idle_worker_stops_while_its_scheduler_runs(make_engine_stack):
    """A worker SIGTERMed alone (docker compose restart worker) with nothing to run stops within its idle time, not at
    the end of the drain grace, though its scheduler still pings it: a replacement started beside it would otherwise
    share the scheduler's steps with it for 30 s. A request after the restart is served by the new worker."""
    stack = make_engine_stack()
    stack.worker.send_signal(signal.SIGTERM)
    started = time.monotonic()
    assert stack.worker.wait(timeout=15) == 0
    assert time.monotonic() - started < 6
    stack.start_worker()
    stack.wait_serving()
    gateway = GatewayProcess(stack)
    try:
        gateway.wait_ready()
        answer = httpx.post(f"{gateway.url}/v1/chat/completions", json={**CHAT, "max_tokens": 3}, timeout=30).json()
    finally:
        gateway.close()
    assert answer["choices"][0]["finish_reason"] == "length" and answer["usage"]["completion_tokens"] == 3


def test_gateway_health_is_503_while_its_scheduler_drains(make_engine_stack):
    """A SIGTERMed scheduler refuses new requests while it finishes its own, so the gateways in front of it must fail
    their readiness probe: vLLM's /health answers 503 while it drains (vllm/entrypoints/serve/instrumentator/
    health.py). It stayed 200, so a load balancer kept sending requests that all got 503."""
    stack = make_engine_stack()
    gateway = GatewayProcess(stack)
    try:
        gateway.wait_ready()
        assert httpx.get(f"{gateway.url}/health", timeout=5).status_code == 200
        plain = Call(gateway.url, CHAT)
        wait_for(lambda: scheduler_load(stack.grpc_addr).num_running == 1, 10)
        stack.scheduler.send_signal(signal.SIGTERM)
        wait_for(lambda: _not_serving(stack), 5)
        health = httpx.get(f"{gateway.url}/health", timeout=5)
        assert stack.scheduler.wait(timeout=60) == 0
        plain.join(10)
    finally:
        gateway.close()
    detail = "the scheduler is shutting down: it finishes the requests it has and takes no new ones"
    assert health.status_code == 503 and health.json() == {
        "status": "unhealthy", "reason": "scheduler_draining", "detail": detail,
        "error": {"code": 503, "message": detail, "type": "unavailable_error"}}
    assert plain.status == 200 and httpx.Response(200, content=plain.content).json()["usage"]["completion_tokens"] \
        == NUM_TOKENS
