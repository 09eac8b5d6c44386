"""End to end: vLLM's stop on a repeated token pattern through gateway, scheduler and worker with the tiny model."""


def complete(http, **body) -> dict:
    response = http.post("/v1/completions", json={"prompt": "Once upon a time", "temperature": 0, "max_tokens": 20,
                                                  "ignore_eos": True, **body})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_one_token_loop_ends_at_its_count(http):
    # Only two tokens may be sampled, one of them biased far ahead: the output is that token over and over.
    loop = {"allowed_token_ids": [100, 200], "logit_bias": {"100": 50}}
    plain = complete(http, **loop)
    assert plain["choices"][0]["finish_reason"] == "length" and plain["usage"]["completion_tokens"] == 20
    cut = complete(http, **loop, max_repetition_pattern_size=3, repetition_min_count=4, n=2)
    for choice in cut["choices"]:
        assert choice["finish_reason"] == "repetition" and choice["stop_reason"] == "repetition_detected"
        assert choice["text"] == plain["choices"][0]["text"][:len(choice["text"])]
    assert cut["usage"]["completion_tokens"] == 8      # four copies of one token, each of two choices
    # A pattern of at least two tokens: [100, 100] four times.
    pairs = complete(http, **loop, max_repetition_pattern_size=3, min_repetition_pattern_size=2,
                     repetition_min_count=4)
    assert pairs["choices"][0]["finish_reason"] == "repetition" and pairs["usage"]["completion_tokens"] == 8


def test_the_repetition_detection_object_does_the_same(http):
    loop = {"allowed_token_ids": [100, 200], "logit_bias": {"100": 50}}
    cut = complete(http, **loop, repetition_detection={"max_pattern_size": 3, "min_count": 4})
    assert cut["choices"][0]["finish_reason"] == "repetition" and cut["usage"]["completion_tokens"] == 4
