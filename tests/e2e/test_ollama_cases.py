"""End to end: Ollama's parts of the public bug reports (../shared/cases: C01 C02 C11 C13 C14) through /api with raw
NDJSON (httpx), against scheduler + worker + gateway; the client and the routes are in test_ollama.py."""
import time
import urllib.request

import httpx
import orjson
import pytest

from tests.e2e.test_ollama import GREEDY, assert_alive, ndjson


C01_BODY = {"model": "default", "stream": True, "options": {"temperature": 0, "seed": 7, "num_predict": 64},
            "messages": [{"role": "user", "content": "Reply with exactly: 🎉 日本語 ✅"}]}


@pytest.mark.parametrize("body", [C01_BODY, {**C01_BODY, "think": False}], ids=["as in the case", "think off"])
def test_c01_streamed_utf8_equals_non_streamed(http, body):
    streamed = http.post("/api/chat", json=body)
    assert streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("application/x-ndjson")
    lines = ndjson(streamed)
    whole = http.post("/api/chat", json={**body, "stream": False}).json()
    text = "".join(line["message"]["content"] for line in lines)
    thinking = "".join(line["message"].get("thinking", "") for line in lines)
    assert text == whole["message"]["content"]
    assert thinking == whole["message"].get("thinking", "")
    assert text.count("\ufffd") == whole["message"]["content"].count("\ufffd")
    assert lines[-1]["done"] is True and all(line["done"] is False for line in lines[:-1])
    # The tiny model writes random text: the check counts when some character of 3+ UTF-8 bytes came out.
    assert any(len(ch.encode()) >= 3 for ch in text + thinking)
    gen = {"model": "default", "prompt": "Emoji list: 🎉 🚀 ✅", "raw": True,
           "options": {"temperature": 0, "seed": 7, "num_predict": 32}}
    pieces = ndjson(http.post("/api/generate", json=gen))
    assert "".join(p["response"] for p in pieces) == http.post("/api/generate", json={**gen, "stream": False}).json()[
        "response"]


@pytest.mark.parametrize("stop", [" 9, 10", None], ids=["the case's", "a piece of the output"])
def test_c02_a_stop_string_is_cut_alike_streamed_or_not(http, stop):
    """C02's Ollama variant: the streamed response lines join to the stream:false response, each running join a
    prefix of it, cut before the stop string (done_reason "stop") where the output without it holds it."""
    body = {"model": "default", "prompt": "Count upward, separated by commas: 1, 2, 3, 4,", "think": False,
            "options": {"temperature": 0, "seed": 1, "num_predict": 48}}
    oracle = http.post("/api/generate", json={**body, "stream": False}).json()
    text = oracle["response"]
    # The tiny model rarely writes the report's stop string, so also stop on a piece of its own output.
    stop = stop or text[5:11]
    asked = {**body, "options": {**body["options"], "stop": [stop]}}
    whole = http.post("/api/generate", json={**asked, "stream": False}).json()
    lines = ndjson(http.post("/api/generate", json={**asked, "stream": True}))
    pos = text.find(stop)
    expected = text[:pos] if pos >= 0 else text
    assert whole["response"] == expected and stop not in whole["response"]
    running = ""
    for line in lines:
        running += line["response"]
        assert expected.startswith(running)
    assert running == expected and lines[-1]["done"] is True
    assert lines[-1]["done_reason"] == whole["done_reason"] == ("stop" if pos >= 0 else oracle["done_reason"])


def test_c11_num_predict_minus_one_stops_at_num_ctx(http):
    body = {"model": "default", "prompt": "Count from 1 upward, one per line:", "stream": False,
            "options": {"num_predict": -1, "num_ctx": 256, "temperature": 0}}
    answer = http.post("/api/generate", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    final = answer.json()
    assert final["done"] is True and final["done_reason"] in ("length", "stop")
    used = final["prompt_eval_count"] + final["eval_count"]
    assert used <= 256
    if final["done_reason"] == "length":
        assert used == 256
    assert_alive(http)


C13_FILLER = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. "


def c13_body(repeats: int) -> dict:
    content = "The secret word is PELICAN. " + C13_FILLER * repeats + "What was the secret word?"
    return {"model": "default", "stream": False, "messages": [{"role": "user", "content": content}],
            "options": {"num_ctx": 512, "temperature": 0, "num_predict": 16}}


def test_c13_prompt_over_num_ctx_is_400_not_truncated(http):
    too_long = http.post("/api/chat", json=c13_body(300))
    assert too_long.status_code == 400
    message = too_long.json()["error"]
    num_tokens = http.post("/v1/tokenize", json={"messages": c13_body(300)["messages"]}).json()["count"]
    assert f"{num_tokens} tokens" in message and "512" in message and "not truncated" in message
    fits = http.post("/api/chat", json=c13_body(10))
    assert fits.status_code == 200, fits.text
    expected = http.post("/v1/tokenize", json={"messages": c13_body(10)["messages"]}).json()["count"]
    assert fits.json()["prompt_eval_count"] == expected < 512
    assert_alive(http)


def running_requests(engine_stack) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{engine_stack.metrics_port}/metrics", timeout=5).read().decode()
    line = next(ln for ln in text.splitlines() if ln.startswith("sparkinfer_num_requests_running"))
    return float(line.split()[-1])


def test_c14_disconnect_mid_stream_frees_the_slot(api_gateway, engine_stack, http):
    body = {"model": "default", "prompt": "Count from 1 to 5000, one number per line:", "stream": True,
            "options": {"num_predict": 4000, "temperature": 0}}
    with httpx.Client(base_url=api_gateway, timeout=60) as session:
        with session.stream("POST", "/api/generate", json=body) as response:
            lines = response.iter_lines()
            assert orjson.loads(next(lines))["done"] is False
            assert orjson.loads(next(lines))["done"] is False
    start = time.monotonic()
    probe = http.post("/api/generate", json={"model": "default", "prompt": "Hi", "stream": False,
                                             "options": {"num_predict": 8, **GREEDY}})
    assert probe.status_code == 200 and probe.json()["eval_count"] >= 1
    assert time.monotonic() - start < 10
    deadline = time.monotonic() + 5
    while running_requests(engine_stack) != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert running_requests(engine_stack) == 0
