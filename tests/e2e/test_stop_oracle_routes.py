"""End to end: random stop strings cut from the tiny model's greedy text (so that they straddle token boundaries, can
match in the first token and overlap each other) end the answer of every route that takes them where a plain
reference cuts the greedy ids' text: /v1/completions (vLLM), llama.cpp's /completion, Ollama's /api/generate and
SGLang's /generate, each whole and streamed (the pieces joined), with the stop string each reports.

The reference decodes each prefix of the greedy ids (holding a character split over tokens until it is whole) and
cuts before the first stop string that ends in a token's new text; of two ending in one token, the one that starts
first (see tests/unit/test_stop_oracle.py)."""
import json
import random

import pytest

from tests.e2e.stack import DEFAULT_MODEL

WORDS = ["fox", "dog", "the", "cat", "hello", "world", "a", "b"]


def cut(tokenizer, token_ids: list, stops: list) -> tuple:
    before = ""
    for k in range(1, len(token_ids) + 1):
        text = tokenizer.decode(token_ids[:k], skip_special_tokens=True)
        text = text.rstrip("\ufffd") if k < len(token_ids) else text
        found = [(text.find(s, max(0, len(before) - len(s) + 1)), rank) for rank, s in enumerate(stops)]
        found = [f for f in found if f[0] != -1]
        if found:
            at, rank = min(found)
            return text[:at], stops[rank]
        before = text
    return before, None


def events(http, path: str, body: dict) -> list:
    with http.stream("POST", path, json=body) as response:
        assert response.status_code == 200
        lines = [line.removeprefix("data: ") for line in response.iter_lines()]
    return [json.loads(line) for line in lines if line.startswith("{")]


def served(http, route: str, prompt: str, stops: list, n: int) -> list:
    """[(text, the stop string it reports or None)] whole, then streamed."""
    if route == "vllm":
        body = {"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True, "stop": stops}
        choice = http.post("/v1/completions", json=body).json()["choices"][0]
        chunks = [e["choices"][0] for e in events(http, "/v1/completions", {**body, "stream": True}) if e["choices"]]
        return [(choice["text"], choice["stop_reason"]),
                ("".join(c["text"] for c in chunks), next((c["stop_reason"] for c in chunks if c.get("stop_reason")), None))]
    if route == "llama.cpp":
        body = {"prompt": prompt, "n_predict": n, "temperature": 0, "ignore_eos": True, "stop": stops}
        whole = http.post("/completion", json=body).json()
        chunks = events(http, "/completion", {**body, "stream": True})
        return [(whole["content"], whole["stopping_word"] or None),
                ("".join(c["content"] for c in chunks), chunks[-1]["stopping_word"] or None)]
    if route == "ollama":
        body = {"model": "tiny", "prompt": prompt, "raw": True, "options": {"num_predict": n, "temperature": 0,
                                                                             "stop": stops}}
        whole = http.post("/api/generate", json={**body, "stream": False}).json()
        chunks = events(http, "/api/generate", {**body, "stream": True})
        return [(whole["response"], None), ("".join(c["response"] for c in chunks), None)]
    body = {"text": prompt, "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True,
                                                "stop": stops}}
    whole, last = http.post("/generate", json=body).json(), events(http, "/generate", {**body, "stream": True})[-1]
    return [(whole["text"], whole["meta_info"]["finish_reason"].get("matched")),
            (last["text"], last["meta_info"]["finish_reason"].get("matched"))]


@pytest.fixture(scope="module")
def cases(http) -> list:
    """[(prompt, stop strings, (the reference's text, the stop string it cut at))] from greedy outputs."""
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(DEFAULT_MODEL)
    rng, out = random.Random(31), []
    while len(out) < 5:
        prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10)))
        greedy = http.post("/v1/completions", json={"prompt": prompt, "max_tokens": 20, "temperature": 0,
                                                    "ignore_eos": True, "return_token_ids": True}).json()
        token_ids, full = greedy["choices"][0]["token_ids"], greedy["choices"][0]["text"]
        stops = []
        for _ in range(rng.randint(1, 2)):
            at = rng.randrange(len(full))
            stop = full[at:at + rng.randint(1, 4)]
            if stop.strip() and "\ufffd" not in stop and stop not in stops:
                stops.append(stop)
        if stops:
            out.append((prompt, stops, cut(tokenizer, token_ids, stops)))
    return out


@pytest.mark.parametrize("route", ["vllm", "llama.cpp", "ollama", "sglang"])
def test_random_stop_strings_cut_each_route_where_the_reference_does(http, cases, route):
    for prompt, stops, (text, matched) in cases:
        for got_text, got_stop in served(http, route, prompt, stops, 20):
            assert got_text == text, (prompt, stops)
            assert got_stop in (None, matched) and (route == "ollama" or (got_stop is None) == (matched is None))
