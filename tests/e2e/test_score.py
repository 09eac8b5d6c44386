"""End to end: POST /v1/score (teacher-forced scoring, gateway/score.py) through gateway, scheduler and worker with
the tiny model, against transformers' Qwen3_5ForCausalLM on the same weights and against the logprobs a chat
generation reports; prompts chunked by a 16-token budget with the prefix cache on."""
import math

import pytest

PROMPT = "Once upon a time there was a little robot who loved to read stories about the sea and the stars."
COMPLETION = " It dreamed of sailing far away, past the moon."
SYSTEM = " ".join(["You are a careful assistant who answers in short sentences."] * 12)
NO_THINK = {"enable_thinking": False}


@pytest.fixture(scope="module")
def http(chunked_http):
    return chunked_http


def score(http, **body) -> dict:
    response = http.post("/v1/score", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def ids_of(http, **body) -> list:
    return http.post("/v1/tokenize", json=body).json()["tokens"]


def reference_logprobs(model, prompt: list, completion: list) -> list:
    """log p(completion[i] | prompt + completion[:i]) from one transformers forward."""
    import torch
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
    return [logp[len(prompt) - 1 + i, t].item() for i, t in enumerate(completion)]


def test_prompt_and_completion_scores_equal_transformers(http, reference):
    model = reference[0]
    out = score(http, prompt=PROMPT, completion=COMPLETION)
    prompt, completion = ids_of(http, prompt=PROMPT), ids_of(http, prompt=COMPLETION)
    assert out["object"] == "score" and out["token_ids"] == completion
    assert out["usage"] == {"prompt_tokens": len(prompt), "completion_tokens": len(completion),
                            "total_tokens": len(prompt) + len(completion)}
    want = reference_logprobs(model, prompt, completion)
    assert max(abs(a - b) for a, b in zip(out["logprobs"], want)) < 1e-3, (out["logprobs"], want)
    assert out["sum_logprob"] == pytest.approx(math.fsum(out["logprobs"]), abs=1e-9)
    assert "".join(out["tokens"]) == COMPLETION
    assert b"".join(bytes(b) for b in out["bytes"]).decode("utf-8") == COMPLETION
    assert "top_logprobs" not in out


def test_messages_score_equals_the_chat_generations_logprobs(http):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Tell me about the sea."}]
    chat = http.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 12, "temperature": 0,
                                                   "logprobs": True, "top_logprobs": 2, "return_token_ids": True,
                                                   "ignore_eos": True, **NO_THINK}).json()
    content, generated = chat["choices"][0]["logprobs"]["content"], chat["choices"][0]["token_ids"]
    assert len(generated) == len(content) == 12
    for _ in range(2):  # the second time the prompt's prefix is in the prefix cache: scoring must not read it
        out = score(http, messages=messages, completion_token_ids=generated, top_logprobs=2, **NO_THINK)
        assert out["usage"]["prompt_tokens"] == len(ids_of(http, messages=messages, **NO_THINK))
        assert max(abs(a - e["logprob"]) for a, e in zip(out["logprobs"], content)) < 1e-3
        for position, entry in zip(out["top_logprobs"], content):
            assert [t["token"] for t in position] == [t["token"] for t in entry["top_logprobs"]]
            assert position[0]["logprob"] >= position[1]["logprob"]


def test_top_logprobs_rank_the_vocabulary(http):
    out = score(http, prompt=PROMPT, completion_token_ids=[5, 17, 300], top_logprobs=4)
    assert out["token_ids"] == [5, 17, 300] and len(out["top_logprobs"]) == 3
    for forced, position in zip(out["logprobs"], out["top_logprobs"]):
        values = [t["logprob"] for t in position]
        assert len(position) == 4 and values == sorted(values, reverse=True) and forced <= values[0] + 1e-6
        assert all(isinstance(t["token_id"], int) and isinstance(t["bytes"], list) for t in position)


@pytest.mark.parametrize("body,param", [
    ({"prompt": PROMPT, "messages": [{"role": "user", "content": "hi"}], "completion": "x"}, "messages"),
    ({"completion": "x"}, "messages"),
    ({"prompt": PROMPT}, "completion"),
    ({"prompt": PROMPT, "completion": ""}, "completion"),
    ({"prompt": "", "completion": "x"}, "prompt"),
    ({"prompt": PROMPT, "completion_token_ids": [10 ** 9]}, "completion_token_ids"),
    ({"prompt": PROMPT, "completion": "x", "top_logprobs": 21}, "top_logprobs"),
    ({"prompt": PROMPT, "completion_token_ids": "12"}, "completion_token_ids"),
], ids=["both-prompts", "no-prompt", "no-completion", "empty-completion", "empty-prompt", "id-past-vocab",
        "top-21", "ids-not-a-list"])
def test_bad_bodies_are_400_in_openai_shape(http, body, param):
    response = http.post("/v1/score", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]


def test_past_the_context_is_400_and_unknown_model_404(http):
    ctx = http.get("/v1/models").json()["data"][0]["max_model_len"]
    response = http.post("/v1/score", json={"prompt": PROMPT, "completion_token_ids": [7] * ctx})
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"
    response = http.post("/v1/score", json={"model": "other", "prompt": PROMPT, "completion": "x"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "model_not_found"
