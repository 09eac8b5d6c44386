"""End to end: a stop string the gateway matches is counted by the scheduler as "stop", a disconnect as "abort"."""
import re
import time
import urllib.request

import httpx
import pytest


PROMPT = "Once upon a time"


def finished(metrics_port: int) -> dict:
    """sparkinfer_request_success_total by finished_reason, from the scheduler's /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    found = re.findall(r'^sparkinfer_request_success_total\{engine="0",finished_reason="(\w+)",model_name="tiny"\} '
                       r'([0-9.e+]+)$', text, re.M)
    return {reason: float(value) for reason, value in found}


def wait_for(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def complete(http, **body) -> dict:
    response = http.post("/v1/completions", json={"prompt": PROMPT, "temperature": 0, "ignore_eos": True, **body})
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]


def test_stop_string_counts_stop_not_abort(http, engine_stack):
    head = complete(http, max_tokens=3)["text"]
    stop = next(c for c in head if c.strip() and c != "\ufffd")
    before = finished(engine_stack.metrics_port)
    for stream in (False, True):
        body = {"prompt": PROMPT, "temperature": 0, "ignore_eos": True, "max_tokens": 64, "stop": [stop],
                "stream": stream}
        response = http.post("/v1/completions", json=body)
        assert response.status_code == 200 and b'"finish_reason":"stop"' in response.content.replace(b" ", b"")
    port = engine_stack.metrics_port
    wait_for(lambda: finished(port).get("stop", 0) == before.get("stop", 0) + 2)
    time.sleep(0.3)  # the gateway's cancel after Finish must not add an abort
    after = finished(port)
    assert after.get("abort", 0) == before.get("abort", 0)
    assert after.get("length", 0) == before.get("length", 0)


def test_client_disconnect_still_counts_abort(api_gateway, engine_stack):
    port = engine_stack.metrics_port
    before = finished(port)
    body = {"prompt": PROMPT, "temperature": 0, "ignore_eos": True, "max_tokens": 4000, "stream": True}
    with httpx.Client(base_url=api_gateway, timeout=60) as session:
        with session.stream("POST", "/v1/completions", json=body) as response:
            assert response.status_code == 200
            next(response.iter_bytes())            # generation is running; now walk away
    wait_for(lambda: finished(port).get("abort", 0) == before.get("abort", 0) + 1)
    after = finished(port)
    assert after.get("stop", 0) == before.get("stop", 0) and after.get("length", 0) == before.get("length", 0)
