"""End to end: a gateway started with SPARKINFER_DISABLE_ACCESS_LOG_FOR_ENDPOINTS (vLLM's
--disable-access-log-for-endpoints) writes no access log line for the probes and scrapes on those paths, and one for
every other request: a Kubernetes probe every 5 s and a Prometheus scrape every 10 s buried the log's other lines
(vllm-project/vllm#29023, vllm-project/aibrix#983)."""
import re
import time

import httpx

from tests.e2e.stack import GatewayProcess


def access_lines(log_path: str) -> list:
    with open(log_path, encoding="utf-8", errors="replace") as f:
        return [line for line in f if re.search(r'" \d{3} ', line) and "request_id=" in line]


def test_the_excluded_endpoints_get_no_access_log_line(engine_stack):
    gateway = GatewayProcess(engine_stack, env={"SPARKINFER_DISABLE_ACCESS_LOG_FOR_ENDPOINTS": "/health, /metrics"})
    try:
        gateway.wait_ready()
        for path in ("/health", "/metrics", "/metrics?name[]=x", "/v1/models", "/version"):
            answer = httpx.get(gateway.url + path, headers={"X-Request-Id": f"probe{path}"}, timeout=10)
            assert answer.status_code == 200
        answer = httpx.post(gateway.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2},
                            headers={"X-Request-Id": "trace-7"}, timeout=60)
        assert answer.status_code == 200
        # aiohttp writes a request's line after its response went out: wait for it before stopping the gateway
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any("trace-7" in line for line in access_lines(gateway.log_path)):
            time.sleep(0.05)
    finally:
        gateway.close()
    lines = access_lines(gateway.log_path)
    assert not [line for line in lines if "GET /health " in line or "GET /metrics" in line], lines
    logged = [re.search(r"request_id=(\S+)", line).group(1) for line in lines]
    assert logged == ["probe/v1/models", "probe/version", "trace-7"], lines
