"""End to end: the /v1 parts of the public bug reports (../shared/cases: C01 C02 C11 C13) as tests, on the shared stack;
C04 and C14, which need a one-slot stack, are in test_openai_cases_one_slot.py."""
import pytest

from tests.e2e.test_openai_api import sse_payloads

EMOJI_PROMPTS = ["Reply with exactly this line and nothing else: 🎉 naïve café — 日本語のテキスト ✅ 👋🏽",
                 "Emoji list: 🎉 🚀 ✅"]
LOREM = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. "


def stream_and_plain(http, path, body):
    plain = http.post(path, json={**body, "stream": False})
    streamed = http.post(path, json={**body, "stream": True})
    assert plain.status_code == streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    return plain.json(), sse_payloads(streamed.content)


def chat_texts(plain, events):
    message = plain["choices"][0]["message"]
    deltas = [e["choices"][0]["delta"] for e in events[:-1] if e["choices"]]
    return ((message["content"] or "") + "|" + (message.get("reasoning_content") or ""),
            "".join(d.get("content") or "" for d in deltas) + "|" + "".join(d.get("reasoning_content") or ""
                                                                            for d in deltas))


def test_c01_multibyte_characters_survive_streaming(http):
    conclusive = 0
    for seed, prompt in enumerate(EMOJI_PROMPTS):
        body = {"model": "default", "messages": [{"role": "user", "content": prompt}], "temperature": 0,
                "seed": 7, "max_tokens": 64}
        plain, events = stream_and_plain(http, "/v1/chat/completions", body)
        assert events[-1] == "[DONE]"
        whole, streamed = chat_texts(plain, events)
        assert streamed == whole and streamed.count("\ufffd") == whole.count("\ufffd")
        conclusive += any(len(ch.encode()) >= 3 and ch != "\ufffd" for ch in whole)
        body = {"model": "default", "prompt": prompt, "temperature": 0, "seed": 7, "max_tokens": 32}
        plain, events = stream_and_plain(http, "/v1/completions", body)
        assert "".join(e["choices"][0]["text"] for e in events[:-1]) == plain["choices"][0]["text"]
        conclusive += any(len(ch.encode()) >= 3 and ch != "\ufffd" for ch in plain["choices"][0]["text"])
    assert conclusive, "no output held a 3+ byte character: inconclusive, change the prompts"


@pytest.mark.parametrize("prompt,stop", [("Count upward, separated by commas: 1, 2, 3, 4,", " 9, 10"),
                                         ("Here is the English alphabet: A B C", " D E F G H I J")],
                         ids=["count", "alphabet"])
def test_c02_stop_oracle_and_prefix_property(http, prompt, stop):
    base = {"model": "default", "prompt": prompt, "max_tokens": 48, "temperature": 0, "seed": 1}
    oracle = http.post("/v1/completions", json=base).json()["choices"][0]
    text = oracle["text"]
    # The tiny model rarely writes the report's stop string, so also stop on a piece of its own output.
    for stop_string in (stop, text[5:11]):
        plain, events = stream_and_plain(http, "/v1/completions", {**base, "stop": [stop_string]})
        pos = text.find(stop_string)
        expected = text[:pos] if pos >= 0 else text
        assert plain["choices"][0]["text"] == expected
        running = ""
        for event in events[:-1]:
            running += event["choices"][0]["text"]
            assert expected.startswith(running)
        assert running == expected and stop_string not in running
        finish = events[-2]["choices"][0]["finish_reason"]
        assert finish == plain["choices"][0]["finish_reason"] == ("stop" if pos >= 0 else oracle["finish_reason"])


def test_c02_chat_endpoint_holds_back_partial_stops(http):
    body = {"model": "default", "messages": [{"role": "user", "content": "Count: 1, 2, 3,"}], "max_tokens": 40,
            "temperature": 0, "enable_thinking": False}
    text = http.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"]
    stop = text[3:8]
    plain, events = stream_and_plain(http, "/v1/chat/completions", {**body, "stop": stop})
    expected = text[:text.find(stop)]
    assert plain["choices"][0]["message"]["content"] == expected
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1] if e["choices"]) == expected


def live(http):
    assert http.get("/v1/models").status_code == 200
    probe = http.post("/v1/completions", json={"model": "default", "prompt": "Hi", "max_tokens": 8})
    assert probe.status_code == 200 and probe.json()["choices"][0]["finish_reason"] in ("stop", "length")


C11_BASE = {"model": "default", "prompt": "Question: Is the sky blue? Answer: Yes", "temperature": 0}
C11_CASES = [
    ("echo-logprobs-zero", {"max_tokens": 0, "echo": True, "logprobs": 1}, 200, None),
    ("negative", {"max_tokens": -1}, 400, "max_tokens"),
    ("wrong-type", {"max_tokens": "ten"}, 400, "max_tokens"),
    ("beyond-context", {"max_tokens": 10_000_000}, 400, "max_tokens"),
    ("null", {"max_tokens": None}, 200, None),
    ("echo-zero", {"max_tokens": 0, "echo": True}, 200, None),
    # max_tokens is checked the same way with echo + logprobs (prompt logprobs).
    ("echo-logprobs-negative", {"max_tokens": -1, "echo": True, "logprobs": 1}, 400, "max_tokens"),
    ("echo-logprobs-wrong-type", {"max_tokens": "ten", "echo": True, "logprobs": 1}, 400, "max_tokens"),
    ("echo-logprobs-beyond-context", {"max_tokens": 10_000_000, "echo": True, "logprobs": 1}, 400, "max_tokens"),
    ("echo-logprobs-null", {"max_tokens": None, "echo": True, "logprobs": 1}, 200, None),
]


@pytest.mark.parametrize("change,status,param", [c[1:] for c in C11_CASES], ids=[c[0] for c in C11_CASES])
def test_c11_max_tokens_edges(http, change, status, param):
    response = http.post("/v1/completions", json={**C11_BASE, **change})
    assert response.status_code == status
    if status == 400:
        error = response.json()["error"]
        assert error["param"] == param and error["type"] == "invalid_request_error"
    elif change.get("echo") and change["max_tokens"] == 0:
        body = response.json()
        assert body["choices"][0]["text"] == C11_BASE["prompt"] and body["usage"]["completion_tokens"] == 0
        assert body["usage"]["prompt_tokens"] > 0 and body["choices"][0]["finish_reason"] == "length"
        if change.get("logprobs") is not None:
            logprobs = body["choices"][0]["logprobs"]
            assert len(logprobs["tokens"]) == body["usage"]["prompt_tokens"] and logprobs["token_logprobs"][0] is None
    else:
        # null: as absent, OpenAI's default of 16 (vLLM's normalize_null_max_tokens; 3fe51c0), within the context.
        usage, context = response.json()["usage"], http.get("/v1/models").json()["data"][0]["max_model_len"]
        assert 1 <= usage["completion_tokens"] <= 16 and usage["total_tokens"] <= context
    live(http)


def test_c11_chat_max_tokens_zero_is_a_400(http):
    response = http.post("/v1/chat/completions", json={"model": "default", "max_tokens": 0,
                                                       "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 400 and response.json()["error"]["param"] == "max_tokens"
    live(http)


def test_c13_prompt_over_context_is_refused_not_truncated(http):
    count = http.post("/v1/tokenize", json={"prompt": LOREM}).json()["count"]
    filler = "The secret word is PELICAN. " + LOREM * (8192 // count + 10) + "What was the secret word?"
    messages = [{"role": "user", "content": filler}]
    response = http.post("/v1/chat/completions", json={"model": "default", "messages": messages, "max_tokens": 16})
    error = response.json()["error"]
    num_prompt = http.post("/v1/tokenize", json={"messages": messages}).json()["count"]
    assert response.status_code == 400 and error["code"] == "context_length_exceeded"
    assert "8192" in error["message"] and str(num_prompt) in error["message"]
    near = [{"role": "user", "content": LOREM * int(0.9 * 8192 // count)}]
    response = http.post("/v1/chat/completions", json={"model": "default", "messages": near, "max_tokens": 8192})
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"
    fits = http.post("/v1/chat/completions", json={"model": "default", "messages": near, "max_tokens": 1})
    assert fits.status_code == 200
    assert fits.json()["usage"]["prompt_tokens"] == http.post("/v1/tokenize", json={"messages": near}).json()["count"]
