"""Unit tests: vLLM's per-API-request histograms on the gateway's /metrics. vllm:request_max_num_generation_tokens (the
"Max Generation Token in Sequence Group" panel of vLLM's Grafana board) and vllm:request_params_n were not served at
all, so that panel stayed empty: once a prompt's n choices have all ended, the gateway observes its n and the most
tokens one of its choices generated (vllm/v1/engine/parallel_sampling.py ParentRequest.observe_finished_request)."""
import re

import orjson
import pytest

from gateway import metrics

REPLY = "Hello world " * 20   # conftest stack's reply
USER = [{"role": "user", "content": "hi"}]
MAX_GEN = "sparkinfer_request_max_num_generation_tokens"
PARAMS_N = "sparkinfer_request_params_n"


async def scrape(client) -> dict:
    """The two histograms' samples from /metrics, as {sample name with its le: value}."""
    text = (await (await client.get("/metrics")).read()).decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith((MAX_GEN, PARAMS_N)):
            name, value = line.rsplit(" ", 1)
            name = re.sub(r'(engine="0"|model_name="fake-model"),?', "", name).replace(",}", "}").replace("{}", "")
            samples[name] = float(value)
    return samples


def delta(before: dict, after: dict, key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


@pytest.mark.parametrize("path, body, num_prompts, n, most", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 4}, 1, 1, 4),
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 3, "n": 2, "stream": True}, 1, 2, 3),
    ("/v1/completions", {"prompt": ["a", "b", "c"], "max_tokens": 5, "n": 2}, 3, 2, 5),
    ("/api/chat", {"model": "fake-model", "messages": USER, "options": {"num_predict": 6}}, 1, 1, 6),
    ("/v1/messages", {"model": "fake-model", "messages": USER, "max_tokens": 7}, 1, 1, 7),
], ids=["chat", "chat-n2-stream", "completions-3-prompts-n2", "ollama", "anthropic"])
async def test_each_prompt_of_an_ended_request_is_observed_once(stack, path, body, num_prompts, n, most):
    client, _ = stack
    before = await scrape(client)
    response = await client.post(path, data=orjson.dumps(body))
    await response.read()
    assert response.status == 200
    after = await scrape(client)
    assert delta(before, after, f"{PARAMS_N}_count") == num_prompts
    assert delta(before, after, f"{PARAMS_N}_sum") == num_prompts * n
    assert delta(before, after, f"{MAX_GEN}_count") == num_prompts
    # The most one choice generated, not the choices' sum.
    assert delta(before, after, f"{MAX_GEN}_sum") == num_prompts * most


async def test_the_buckets_are_vllms_up_to_the_context(stack):
    client, _ = stack
    await (await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, "max_tokens": 2}))).read()
    samples = await scrape(client)
    bounds = [key.split('le="')[1].split('"')[0] for key in samples if key.startswith(f"{MAX_GEN}_bucket")]
    assert bounds == ["1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "2000.0",
                      "+Inf"]
    n_bounds = [key.split('le="')[1].split('"')[0] for key in samples if key.startswith(f"{PARAMS_N}_bucket")]
    assert n_bounds == ["1.0", "2.0", "5.0", "10.0", "20.0", "+Inf"]


async def test_a_refused_request_is_not_observed(stack):
    client, fake = stack
    fake.script.max_running = 0
    before = await scrape(client)
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, "max_tokens": 4}))
    assert response.status == 429 and orjson.loads(await response.read())["error"]["code"] == "server_overloaded"
    after = await scrape(client)
    assert delta(before, after, f"{PARAMS_N}_count") == 0 and delta(before, after, f"{MAX_GEN}_count") == 0


def test_observe_prompts_takes_the_most_of_each_prompts_choices():
    before = metrics.REGISTRY.get_sample_value(f"{MAX_GEN}_sum") or 0.0
    metrics.observe_prompts(2, [3, 9, 4, 1], [True] * 4)
    assert (metrics.REGISTRY.get_sample_value(f"{MAX_GEN}_sum") or 0.0) - before == 9 + 4
