"""llama-server's llamacpp:* series on the gateway's /metrics. GET /props says endpoint_metrics: true, as llama-server
started with --metrics does, yet /metrics had no llamacpp:* series, so a monitor of llama-server (one reading
llamacpp:tokens_predicted_total, llamacpp:requests_processing, as tools/server/server-context.cpp serves them) found
nothing. Oracle: k requests on four APIs, their tokens added up from the usage each client got."""
import orjson
from prometheus_client.parser import text_string_to_metric_families

USER = [{"role": "user", "content": "hi"}]
REQUESTS = [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 4, "n": 2}),
    ("/v1/completions", {"prompt": ["a b", "c"], "max_tokens": 3, "stream": True,
                         "stream_options": {"include_usage": True}}),
    ("/completion", {"prompt": "hello there", "n_predict": 5}),
    ("/api/generate", {"model": "fake-model", "prompt": "hi", "stream": False, "options": {"num_predict": 6}}),
]


async def scrape(client) -> dict:
    """{sample name: value} of /metrics (labels dropped: one model, one engine)."""
    text = (await (await client.get("/metrics")).read()).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels.keys()
            - {"model_name", "engine"}}


def used(path: str, raw: bytes) -> tuple:
    """(prompt tokens, generated tokens) as the client was told them; a prompt counts once per choice, as each of
    llama-server's slots processes it (and as vLLM's prompt_tokens_total counts n: 2)."""
    if path == "/v1/completions":
        usage = [orjson.loads(e[6:]) for e in raw.decode().split("\n\n") if e.startswith("data: {")][-1]["usage"]
        return usage["prompt_tokens"], usage["completion_tokens"]
    body = orjson.loads(raw)
    if path == "/completion":
        return body["tokens_evaluated"], body["tokens_predicted"]
    if path == "/api/generate":
        return body["prompt_eval_count"], body["eval_count"]
    return body["usage"]["prompt_tokens"] * len(body["choices"]), body["usage"]["completion_tokens"]


async def test_llama_servers_series_count_what_the_clients_were_told(stack):
    client, _ = stack
    before = await scrape(client)
    prompt = generated = 0
    for path, body in REQUESTS:
        response = await client.post(path, data=orjson.dumps(body))
        assert response.status == 200, await response.text()
        tokens = used(path, await response.read())
        prompt, generated = prompt + tokens[0], generated + tokens[1]
    after = await scrape(client)

    def grew(name):
        return after[name] - before.get(name, 0.0)
    assert generated > 0 and prompt > 0
    assert grew("llamacpp:tokens_predicted_total") == generated == grew("sparkinfer_gateway_generation_tokens_total")
    assert grew("llamacpp:prompt_tokens_total") == prompt == grew("sparkinfer_gateway_prompt_tokens_total")
    assert after["llamacpp:requests_processing"] == after["sparkinfer_num_requests_running"]
    assert after["llamacpp:requests_deferred"] == after["sparkinfer_num_requests_waiting"]


async def test_props_says_so_and_the_series_are_typed_as_llama_servers(stack):
    client, _ = stack
    assert orjson.loads(await (await client.get("/props")).read())["endpoint_metrics"] is True
    text = (await (await client.get("/metrics")).read()).decode()
    for name, kind in [("llamacpp:prompt_tokens_total", "counter"), ("llamacpp:tokens_predicted_total", "counter"),
                       ("llamacpp:requests_processing", "gauge"), ("llamacpp:requests_deferred", "gauge")]:
        family = name.removesuffix("_total")
        assert f"# TYPE {family if kind == 'gauge' else name} {kind}" in text and f"\n{name} " in text
    named = (await (await client.get("/metrics?name[]=llamacpp:requests_processing")).read()).decode()
    assert "\nllamacpp:requests_processing " in named and "llamacpp:prompt_tokens_total" not in named
