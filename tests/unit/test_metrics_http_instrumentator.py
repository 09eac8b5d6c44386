"""vLLM's API server counts its HTTP requests with prometheus-fastapi-instrumentator's default series
(vllm/entrypoints/serve/instrumentator/metrics.py): http_requests_total{handler, method, status} with the status class
("2xx") and http_request_duration_seconds{handler, method}, its probe and scrape handlers (/metrics, /health, /load,
/ping, /version, /server_info) left out. vLLM's overview board (examples/observability/dashboards/grafana/
vllm_overview.json) reads them bare: "5xx ratio" (http_requests_total{status="5xx"} over all), "HTTP requests by status"
(sum by (status)), "by endpoint" (sum by (handler)) and "HTTP mean duration by endpoint"; all four were empty here, the
gateway counting only sparkinfer_gateway_http_requests_total{route, status}."""
import os
import time

from prometheus_client.parser import text_string_to_metric_families


async def scrape(client) -> dict:
    """{(name, frozenset of labels but model_name): value} of the gateway's /metrics."""
    text = (await (await client.get("/metrics")).read()).decode()
    return {(sample.name, frozenset((k, v) for k, v in sample.labels.items() if k != "model_name")): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name.startswith("http_request")}


def grown(before: dict, after: dict) -> dict:
    """The series that grew between two scrapes, by how much."""
    return {key: value - before.get(key, 0.0) for key, value in after.items() if value != before.get(key, 0.0)}


def key(name: str, **labels) -> tuple:
    return name, frozenset(labels.items())


async def test_requests_are_counted_as_vllms_instrumentator_counts_them(stack):
    client, _ = stack
    before = await scrape(client)
    for _ in range(2):
        reply = await client.post("/v1/completions", json={"model": "fake-model", "prompt": "hi", "max_tokens": 2})
        assert reply.status == 200
    assert (await client.post("/v1/completions", json={"model": "fake-model", "max_tokens": 2})).status == 400
    assert (await client.get("/v1/models")).status == 200
    assert (await client.get("/no/such/route")).status == 404
    for path in ("/health", "/ping", "/version", "/api/version", "/v1/health"):
        await client.get(path)
    after = await scrape(client)
    counts = {k: v for k, v in grown(before, after).items() if k[0] == "http_requests_total"}
    assert counts == {
        key("http_requests_total", handler="/v1/completions", method="POST", status="2xx"): 2.0,
        key("http_requests_total", handler="/v1/completions", method="POST", status="4xx"): 1.0,
        key("http_requests_total", handler="/v1/models", method="GET", status="2xx"): 1.0,
        key("http_requests_total", handler="none", method="GET", status="4xx"): 1.0,
    }
    durations = grown(before, after)
    assert durations[key("http_request_duration_seconds_count", handler="/v1/completions", method="POST")] == 3.0
    assert durations[key("http_request_duration_seconds_bucket", handler="/v1/models", method="GET", le="+Inf")] == 1.0
    assert durations[key("http_request_duration_seconds_sum", handler="/v1/models", method="GET")] > 0


async def test_the_process_series_of_vllms_api_server_are_there(stack):
    """vLLM's instances board reads the API server's process series from its port (prometheus_client's default
    registry): "API server process" CPU, resident memory and open descriptors over their limit, and the Uptime column
    (time() - process_start_time_seconds). The gateway's registry had none."""
    client, _ = stack
    text = (await (await client.get("/metrics")).read()).decode()
    values = {sample.name: sample.value for family in text_string_to_metric_families(text)
              for sample in family.samples if sample.name.startswith("process_")}
    assert 0 < values["process_start_time_seconds"] <= time.time()
    assert values["process_resident_memory_bytes"] > 0 and values["process_cpu_seconds_total"] > 0
    assert 3 <= values["process_open_fds"] <= len(os.listdir("/proc/self/fd")) + 8 <= values["process_max_fds"] + 8
    named = (await (await client.get("/metrics?name[]=process_start_time_seconds")).read()).decode()
    assert [sample.name for family in text_string_to_metric_families(named) for sample in family.samples] == [
        "process_start_time_seconds"]
