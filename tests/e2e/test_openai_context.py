"""End to end: the context the OpenAI routes state and enforce is the one the scheduler runs with."""
import httpx
from grpc_health.v1 import health_pb2

from tests.e2e.stack import GatewayProcess
from tests.e2e.test_finish_reason import wait_for

SERVING = health_pb2.HealthCheckResponse.SERVING


def test_context_capped_by_the_kv_pool_holds_for_a_gateway_started_first(make_engine_stack):
    """A 4 MiB KV pool holds 4096 tokens of the tiny model's 8192. A gateway started with the scheduler (as `make
    run` starts them) fetched the card before the worker's hello and kept the checkpoint's 8192: /v1/models said
    8192 and a prompt + max_tokens past 4096 got 200 with finish_reason "length" instead of a 400."""
    stack = make_engine_stack(env={"SPARKINFER_KV_CACHE_MIB": "4", "SPARKINFER_PREFIX_CACHE": "0"}, start=False)
    stack.start_scheduler()
    gateway = GatewayProcess(stack)
    try:
        stack.start_worker()
        stack.wait_serving()
        gateway.wait_ready()
        with httpx.Client(base_url=gateway.url, timeout=60) as http:
            assert http.get("/v1/models").json()["data"][0]["max_model_len"] == 4096
            assert http.post("/tokenize", json={"prompt": "hi"}).json()["max_model_len"] == 4096
            too_long = http.post("/v1/completions", json={"prompt": [5] * 16, "max_tokens": 5000})
            error = too_long.json()["error"]
            assert too_long.status_code == 400 and error["code"] == "context_length_exceeded"
            assert error["param"] == "max_tokens" and "4096" in error["message"] and "5016" in error["message"]
            prompt = http.post("/v1/completions", json={"prompt": [5] * 4100, "max_tokens": 1})
            assert prompt.status_code == 400 and prompt.json()["error"]["param"] == "prompt"
            fits = http.post("/v1/completions", json={"prompt": [5] * 4000, "max_tokens": 96, "ignore_eos": True})
            assert fits.status_code == 200 and fits.json()["usage"]["total_tokens"] == 4096
    finally:
        gateway.close()


def test_the_scheduler_refuses_a_request_past_its_context_that_a_stale_gateway_let_through(make_engine_stack):
    """The worker restarted with a smaller KV pool (context 8192 -> 4096) between two requests of a gateway, so the
    gateway saw no outage and still checked against 8192. The scheduler ended such a request at its 4096 with
    finish_reason "length" (a silently short 200, and any direct gRPC client could do the same); it now refuses it
    itself with vLLM's 400 and its counts, and the gateway fetches the card again."""
    stack = make_engine_stack(env={"SPARKINFER_PREFIX_CACHE": "0"})
    gateway = GatewayProcess(stack)
    try:
        gateway.wait_ready()
        with httpx.Client(base_url=gateway.url, timeout=60) as http:
            assert http.get("/v1/models").json()["data"][0]["max_model_len"] == 8192
            stack.kill_worker()
            wait_for(lambda: stack.health() != SERVING, 10)
            stack.worker_env = {"SPARKINFER_KV_CACHE_MIB": "4"}
            stack.start_worker()
            stack.wait_serving()
            refused = http.post("/v1/completions", json={"prompt": [5] * 16, "max_tokens": 5000})
            anthropic = http.post("/v1/messages", json={"model": "tiny", "max_tokens": 5000, "messages": [
                {"role": "user", "content": "hi"}]})
            models = http.get("/v1/models").json()
    finally:
        gateway.close()
    assert refused.status_code == 400 and refused.json()["error"] == {
        "message": "This model's maximum context length is 4096 tokens. However, you requested 5016 tokens (16 in "
                   "the messages, 5000 in the completion). Please reduce the length of the messages or completion. "
                   "You requested 5000 output tokens and your prompt contains at least 16 input tokens, for a total "
                   "of at least 5016 tokens. With this prompt, max_tokens can be at most 4080.",
        "type": "invalid_request_error", "param": "max_tokens", "code": "context_length_exceeded"}
    message = anthropic.json()["error"]["message"]
    assert anthropic.status_code == 400 and message.startswith("input length and `max_tokens` exceed context limit: ")
    assert message.split(": ", 1)[1].startswith(tuple(f"{n} + 5000 > 4096" for n in range(1, 100)))
    assert models["data"][0]["max_model_len"] == 4096


def test_max_model_len_caps_the_context_as_vllms_flag(make_engine_stack):
    """SPARKINFER_MAX_MODEL_LEN (vLLM's --max-model-len) is the context every API states and enforces; there was no
    way to serve less than the checkpoint's (or the KV pool's) context."""
    stack = make_engine_stack(env={"SPARKINFER_MAX_MODEL_LEN": "1000", "SPARKINFER_PREFIX_CACHE": "0"})
    gateway = GatewayProcess(stack)
    try:
        gateway.wait_ready()
        with httpx.Client(base_url=gateway.url, timeout=60) as http:
            models = http.get("/v1/models").json()
            refused = http.post("/v1/completions", json={"prompt": [5] * 16, "max_tokens": 990})
            fits = http.post("/v1/completions", json={"prompt": [5] * 990, "max_tokens": 10, "ignore_eos": True})
    finally:
        gateway.close()
    assert models["data"][0]["max_model_len"] == 1000
    assert refused.status_code == 400 and refused.json()["error"]["message"] == (
        "This model's maximum context length is 1000 tokens. However, you requested 1006 tokens (16 in the "
        "messages, 990 in the completion). Please reduce the length of the messages or completion. You requested 990 "
        "output tokens and your prompt contains at least 16 input tokens, for a total of at least 1006 tokens. With "
        "this prompt, max_tokens can be at most 984.")
    assert fits.status_code == 200 and fits.json()["usage"]["total_tokens"] == 1000
