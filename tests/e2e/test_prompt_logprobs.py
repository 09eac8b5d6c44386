"""End to end: prompt logprobs (completions echo + logprobs, vLLM prompt_logprobs) through gateway, scheduler and
worker with the tiny model, prompts chunked by a 16-token budget and the prefix cache on."""
import json
import math

import pytest

PROMPT = "Once upon a time there was a little robot who loved to read stories about the sea and the stars."
SYSTEM = " ".join(["You are a careful assistant who answers in short sentences."] * 12)


@pytest.fixture(scope="module")
def http(chunked_http):
    return chunked_http


def post(http, path: str, **body) -> dict:
    response = http.post(path, json={"temperature": 0, **body})
    assert response.status_code == 200, response.text
    return response.json()


def prompt_ids(http, prompt: str) -> list:
    return http.post("/tokenize", json={"prompt": prompt}).json()["tokens"]


def check_echo_logprobs(logprobs: dict, prompt: str, num_prompt: int, top: int) -> None:
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    assert "".join(logprobs["tokens"][:num_prompt]) == prompt
    offsets = logprobs["text_offset"]
    assert offsets[0] == 0 and all(a <= b for a, b in zip(offsets, offsets[1:]))
    assert all(lp <= 0 for lp in logprobs["token_logprobs"][1:])
    assert all(len(t) in (top, top + 1) for t in logprobs["top_logprobs"][1:num_prompt])


@pytest.mark.parametrize("max_tokens", [0, 1], ids=["prompt-only", "one-token"])
def test_echo_logprobs_cover_the_prompt(http, max_tokens):
    num_prompt = len(prompt_ids(http, PROMPT))
    assert num_prompt > 16
    out = post(http, "/v1/completions", prompt=PROMPT, echo=True, logprobs=3, max_tokens=max_tokens)
    choice = out["choices"][0]
    assert choice["finish_reason"] == "length" and choice["text"].startswith(PROMPT)
    assert out["usage"] == {**out["usage"], "prompt_tokens": num_prompt, "completion_tokens": max_tokens}
    assert len(choice["logprobs"]["tokens"]) == num_prompt + max_tokens
    check_echo_logprobs(choice["logprobs"], PROMPT, num_prompt, 3)
    if max_tokens == 0:
        assert choice["text"] == PROMPT


def test_echo_logprobs_match_prompt_logprobs_and_repeat(http):
    ids = prompt_ids(http, PROMPT)
    echo = post(http, "/v1/completions", prompt=PROMPT, echo=True, logprobs=2, max_tokens=0)["choices"][0]
    plp = post(http, "/v1/completions", prompt=PROMPT, prompt_logprobs=2, max_tokens=1)["choices"][0]
    again = post(http, "/v1/completions", prompt=PROMPT, echo=True, logprobs=2, max_tokens=0)["choices"][0]
    assert echo["logprobs"] == again["logprobs"]
    positions = plp["prompt_logprobs"]
    assert len(positions) == len(ids) and positions[0] is None
    for token_id, position, echoed in zip(ids[1:], positions[1:], echo["logprobs"]["token_logprobs"][1:]):
        own = position[str(token_id)]
        assert math.isclose(own["logprob"], echoed, abs_tol=1e-6) and own["rank"] >= 1
        ranks = sorted(entry["rank"] for key, entry in position.items() if key != str(token_id))
        assert len(position) in (2, 3) and ranks == list(range(1, len(ranks) + 1))
        assert all(entry["decoded_token"] is not None for entry in position.values())


def test_chat_prompt_logprobs_sit_beside_the_choices(http):
    out = post(http, "/v1/chat/completions", messages=[{"role": "user", "content": PROMPT}], prompt_logprobs=0,
               max_tokens=2)
    positions = out["prompt_logprobs"]
    assert len(positions) == out["usage"]["prompt_tokens"] and positions[0] is None
    assert all(len(p) == 1 and next(iter(p.values()))["logprob"] <= 0 for p in positions[1:])
    assert "prompt_logprobs" not in out["choices"][0]


def test_stream_echo_logprobs_first_chunk_carries_the_prompt(http):
    body = {"prompt": PROMPT, "echo": True, "logprobs": 1, "max_tokens": 4, "temperature": 0, "stream": True}
    chunks = []
    with http.stream("POST", "/v1/completions", json=body) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunks.append(json.loads(line[6:]))
    first = chunks[0]["choices"][0]
    assert first["text"] == PROMPT
    check_echo_logprobs(first["logprobs"], PROMPT, len(prompt_ids(http, PROMPT)), 1)
    whole = post(http, "/v1/completions", **{k: v for k, v in body.items() if k != "stream"})["choices"][0]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["text"]


def test_prefix_cache_does_not_shorten_prompt_logprobs(http):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
    post(http, "/v1/chat/completions", messages=messages, max_tokens=1)
    hit = post(http, "/v1/chat/completions", messages=messages, max_tokens=1)
    assert hit["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    first = post(http, "/v1/chat/completions", messages=messages, max_tokens=1, prompt_logprobs=1)
    second = post(http, "/v1/chat/completions", messages=messages, max_tokens=1, prompt_logprobs=1)
    for out in (first, second):
        assert len(out["prompt_logprobs"]) == out["usage"]["prompt_tokens"]
        assert out["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert first["prompt_logprobs"] == second["prompt_logprobs"]


@pytest.mark.parametrize("path,body,param", [
    ("/v1/completions", {"prompt": "hi", "echo": True, "logprobs": 21}, "logprobs"),
    ("/v1/completions", {"prompt": "hi", "prompt_logprobs": -1}, "prompt_logprobs"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 21},
     "prompt_logprobs"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 1, "stream": True},
     "prompt_logprobs"),
], ids=["logprobs-21", "prompt-logprobs-negative", "chat-prompt-logprobs-21", "chat-stream"])
def test_bad_values_name_the_field(http, path, body, param):
    response = http.post(path, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    # the message names the field as vLLM writes it ("Requested prompt logprobs of 21, which is greater than max
    # allowed: 20" for prompt_logprobs past vLLM's cap, -1 being the whole vocabulary)
    named = param in error["message"] or param.replace("_", " ") in error["message"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and named
