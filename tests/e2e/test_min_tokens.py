"""End to end: min_tokens through gateway, scheduler and worker with the tiny model (eos and stop strings)."""
import pytest


EOS = 1017          # the tiny model's first eos id (generation_config.json)
PROMPT = "Once upon a time"


def complete(http, **body) -> dict:
    response = http.post("/v1/completions", json={"prompt": PROMPT, "temperature": 0, **body})
    assert response.status_code == 200, response.text
    return response.json()


def test_eos_is_held_back_until_min_tokens(http):
    # A huge bias makes eos the greedy choice at every position: without min_tokens it ends at once.
    eager = {"max_tokens": 24, "ignore_eos": False, "logit_bias": {str(EOS): 100}}
    early = complete(http, **eager)
    assert early["choices"][0]["finish_reason"] == "stop" and early["usage"]["completion_tokens"] <= 1
    held = complete(http, **eager, min_tokens=20)
    assert held["usage"]["completion_tokens"] >= 20
    # The eos masked for 20 tokens wins at the 21st: the request still ends with "stop", not "length".
    assert held["choices"][0]["finish_reason"] == "stop" and held["usage"]["completion_tokens"] == 21
    chat = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "temperature": 0,
                                                   "min_tokens": 20, **eager}).json()
    assert chat["usage"]["completion_tokens"] == 21 and chat["choices"][0]["finish_reason"] == "stop"


def test_stop_string_applies_only_after_min_tokens(http):
    plain = {"max_tokens": 24, "ignore_eos": True}
    reference = complete(http, **plain)["choices"][0]["text"]
    first_19 = complete(http, max_tokens=19, ignore_eos=True)["choices"][0]["text"]
    head = complete(http, max_tokens=3, ignore_eos=True)["choices"][0]["text"]
    assert reference.startswith(first_19) and first_19.startswith(head)
    tail = reference[len(first_19):]
    # A character generated in the first three tokens that the greedy output repeats after token 19.
    stop = next(c for c in head if c.strip() and c != "\ufffd" and c in tail)
    cut = complete(http, **plain, stop=[stop])["choices"][0]
    assert cut["finish_reason"] == "stop" and len(cut["text"]) < len(head)
    late = complete(http, **plain, stop=[stop], min_tokens=19)["choices"][0]
    # The early occurrences are ordinary text now; the stop string ends the output at its first match in
    # the text of token 20 on (vLLM checks stop strings once len(output_token_ids) > min_tokens).
    assert late["finish_reason"] == "stop" and stop in first_19
    assert late["text"] == first_19 + tail[:tail.index(stop)]
