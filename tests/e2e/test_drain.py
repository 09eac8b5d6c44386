"""End to end: SIGTERM on a gateway (a scale-down, a rolling update, `docker compose stop`) drains it: the port closes
at once, the requests in flight finish, then it exits 0; past SPARKINFER_DRAIN_GRACE_S what is left is cut and freed in
the scheduler. Before, every stream in flight was cut mid-body and every non-streamed request got no response at all."""
import signal
import subprocess
import threading

import httpx
import pytest

from tests.e2e.stack import GatewayProcess
from tests.e2e.test_finish_reason import wait_for
from tests.e2e.test_openai_api import scheduler_load, sse_payloads

NUM_TOKENS = 120
CHAT = {"model": "default", "messages": [{"role": "user", "content": "count"}], "max_tokens": NUM_TOKENS,
        "ignore_eos": True, "temperature": 0}


class Call(threading.Thread):
    """One request on its own thread: `status`, `body` (bytes) once done, `error` when the connection broke."""

    def __init__(self, url: str, body: dict):
        super().__init__(daemon=True)
        self.url, self.body = url, body
        self.status = self.content = self.error = None
        self.start()

    def run(self) -> None:
        try:
            response = httpx.post(f"{self.url}/v1/chat/completions", json=self.body, timeout=120)
            self.status, self.content = response.status_code, response.content
        except httpx.HTTPError as exc:
            self.error = exc


def _refused(url: str) -> bool:
    try:
        httpx.get(f"{url}/health", timeout=2)
    except httpx.ConnectError:
        return True
    return False


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


def test_past_the_drain_grace_the_rest_is_cut_and_freed(engine_stack, gateway_over):
    gateway = gateway_over({"SPARKINFER_DRAIN_GRACE_S": "0.5"})
    endless = Call(gateway.url, {**CHAT, "max_tokens": 4000, "stream": True})
    wait_for(lambda: scheduler_load(engine_stack.grpc_addr).num_running == 1, 10)
    gateway.proc.send_signal(signal.SIGTERM)
    try:
        assert gateway.proc.wait(timeout=10) == 0
    except subprocess.TimeoutExpired:
        pytest.fail("the gateway outlived its drain grace by 10 s")
    wait_for(lambda: scheduler_load(engine_stack.grpc_addr).num_running == 0, 5)
    endless.join(10)
    assert endless.status is None and endless.error is not None
