"""End to end: the served tokens and logprobs of the tiny model against transformers' Qwen3_5ForCausalLM on the same
weights, with each API's sampling rules computed here from the oracle's logits: vLLM's on /v1 (logit_bias, penalties
on the output, temperature, min_p, top_k/top_p), llama.cpp's on /completion (penalties over the last 64
prompt+output tokens, filters before the temperature)."""
import pytest
import torch

PROMPT = "The quick brown fox jumps over the lazy dog. The quick brown fox"
INF = float("inf")


@pytest.fixture(scope="module")
def oracle(reference):
    model, tokenizer = reference

    def logits(ids: list) -> torch.Tensor:
        with torch.no_grad():
            return model(torch.tensor([ids])).logits[0].float()
    return logits, tokenizer.encode(PROMPT)


def post(http, path: str, body: dict) -> dict:
    response = http.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_greedy_tokens_and_logprobs_are_the_oracles(http, oracle):
    logits, prompt = oracle
    choice = post(http, "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0, "logprobs": 3,
                                             "return_token_ids": True})["choices"][0]
    out = choice["token_ids"]
    logprobs = logits(prompt + out).log_softmax(-1)[len(prompt) - 1:]
    assert out == logprobs[:len(out)].argmax(-1).tolist()
    for i, token_id in enumerate(out):
        assert abs(choice["logprobs"]["token_logprobs"][i] - logprobs[i, token_id].item()) < 1e-3
        served = sorted(choice["logprobs"]["top_logprobs"][i].values(), reverse=True)[:3]
        assert max(abs(a - b) for a, b in zip(served, logprobs[i].topk(3).values.tolist())) < 1e-3


def _penalized_greedy(logits, prompt, steps, bias, presence, window_counts):
    """Greedy under logit_bias then a presence penalty: counted over the output (vLLM) or the last 64 prompt+output
    tokens (llama.cpp)."""
    out = []
    for _ in range(steps):
        row = logits(prompt + out)[-1].clone()
        for token_id, value in bias.items():
            row[token_id] += value
        counted = (prompt + out)[-64:] if window_counts else out
        if counted:
            row[torch.tensor(sorted(set(counted)))] -= presence
        out.append(int(row.argmax()))
    return out


def test_presence_penalty_counts_what_each_api_counts(http, oracle):
    logits, prompt = oracle
    first = logits(prompt)[-1]
    # A prompt token made the best next token by its bias: a presence penalty on the prompt (llama.cpp) undoes that,
    # one on the output only (vLLM) does not until it has been written.
    target = prompt[0]
    bias = {target: float(first.max() - first[target]) + 0.5}
    body = {"prompt": prompt, "temperature": 0, "presence_penalty": 2.0}
    v1 = post(http, "/v1/completions", {**body, "max_tokens": 6, "return_token_ids": True,
                                        "logit_bias": {str(k): v for k, v in bias.items()}})["choices"][0]["token_ids"]
    llama = post(http, "/completion", {**body, "n_predict": 6, "return_tokens": True,
                                       "logit_bias": [[k, v] for k, v in bias.items()]})["tokens"]
    assert v1 == _penalized_greedy(logits, prompt, 6, bias, 2.0, window_counts=False)
    assert llama == _penalized_greedy(logits, prompt, 6, bias, 2.0, window_counts=True)
    assert v1[0] == target != llama[0]


def _support(row: torch.Tensor, order: list, temperature: float, top_p: float, min_p: float) -> set:
    for step in order:
        if step == "temperature":
            row = row / temperature
        elif step == "min_p":
            probs = row.softmax(-1)
            row = row.masked_fill(probs < min_p * probs.max(), -INF)
        elif step == "top_p":
            probs = row.softmax(-1)
            sorted_probs, order_ids = probs.sort(descending=True)
            row = row.clone()
            row[order_ids[(sorted_probs.cumsum(0) - sorted_probs) > top_p]] = -INF
    return set(torch.nonzero(torch.isfinite(row)).flatten().tolist())


@pytest.mark.parametrize("path, order", [
    ("/v1/completions", ["temperature", "min_p", "top_p"]),
    ("/completion", ["top_p", "min_p", "temperature"]),
], ids=["vllm", "llama.cpp"])
def test_sampled_tokens_stay_in_each_chains_support(http, oracle, path, order):
    logits, prompt = oracle
    params = {"prompt": prompt, "temperature": 1.8, "top_p": 0.5, "min_p": 0.6, "top_k": 0}
    outs = []
    for seed in range(4):
        body = {**params, "seed": seed, **({"max_tokens": 5, "return_token_ids": True} if path != "/completion"
                                         else {"n_predict": 5, "return_tokens": True})}
        answer = post(http, path, body)
        outs.append(answer["choices"][0]["token_ids"] if path != "/completion" else answer["tokens"])
    for out in outs:
        rows = logits(prompt + out)[len(prompt) - 1:]
        for i, token_id in enumerate(out):
            assert token_id in _support(rows[i], order, 1.8, 0.5, 0.6), (i, token_id)
