"""End to end: the context the OpenAI routes state and enforce is the one the scheduler runs with."""
import httpx

from tests.e2e.stack import GatewayProcess


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
