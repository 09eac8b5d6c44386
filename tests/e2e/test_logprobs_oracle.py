"""End to end: the logprobs each API returns for sampled (not greedy) tokens under penalties and a temperature, against
transformers' log_softmax of the same token sequence (the `reference` fixture, float32 as the CPU worker).

Every API reports the model's raw distribution: vLLM's default logprobs_mode raw_logprobs (before penalties and the
temperature), llama-server's n_probs without post_sampling_probs, Ollama's runner (its logprobs are computed from the
raw logits, ollama/ollama#16196). The alternatives are the most likely tokens in order; vLLM's chat top_logprobs are
the first N of its per-position dict, the sampled token first (vllm/v1/engine/logprobs.py _make_logprob_dict), so the
sampled token is always among them; bytes are the token's own bytes."""
import httpx
import pytest
import torch

from tests.e2e.test_distribution_oracle import token_bytes

PROMPT = "The quick brown fox jumps over the lazy dog. The quick brown fox"
SAMPLING = {"temperature": 1.5, "top_k": 0, "top_p": 1.0}
TOL = 1e-3


@pytest.fixture(scope="module")
def oracle(reference):
    model, tokenizer = reference
    by_bytes = token_bytes(tokenizer)

    def logprobs(ids: list) -> torch.Tensor:
        with torch.no_grad():
            return model(torch.tensor([ids])).logits[0].float().log_softmax(-1)
    return logprobs, {i: b for b, i in by_bytes.items()}, tokenizer


def check_alternatives(row: torch.Tensor, served: list, k: int) -> None:
    """served [(id, logprob)] are the k most likely tokens of row, best first (ties in any order)."""
    assert len(served) == k
    values, _ = row.topk(k)
    for (token_id, logprob), best in zip(served, values.tolist()):
        assert abs(logprob - best) < TOL and abs(row[token_id].item() - logprob) < TOL


def test_chat_logprobs_of_sampled_tokens_are_the_raw_distribution(http, oracle):
    logprobs, bytes_of, _ = oracle
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Tell me about foxes"}], "max_tokens": 8,
            "seed": 9, "logprobs": True, "top_logprobs": 3, "presence_penalty": 1.5, "repetition_penalty": 1.3,
            "return_token_ids": True, "enable_thinking": False, **SAMPLING}
    answer = http.post("/v1/chat/completions", json=body).json()
    choice = answer["choices"][0]
    prompt, out = answer.get("prompt_token_ids") or choice["prompt_token_ids"], choice["token_ids"]
    rows = logprobs(prompt + out)[len(prompt) - 1:]
    entries = choice["logprobs"]["content"]
    assert len(entries) == len(out)
    for i, (entry, token_id) in enumerate(zip(entries, out)):
        row = rows[i]
        assert abs(entry["logprob"] - row[token_id].item()) < TOL
        assert bytes(entry["bytes"]) == bytes_of[token_id]
        # vLLM's dict: the sampled token, then the most likely ones; the first 3 of it
        ranked = [token_id] + [t for t in row.topk(4).indices.tolist() if t != token_id]
        assert [a["logprob"] for a in entry["top_logprobs"]] == pytest.approx(
            [row[t].item() for t in ranked[:3]], abs=TOL)
    streamed = []
    with http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as events:
        for line in events.iter_lines():
            if line.startswith("data: {"):
                for c in httpx.Response(200, content=line[6:]).json()["choices"]:
                    streamed += (c.get("logprobs") or {}).get("content") or []
    assert streamed == entries


def test_llama_cpp_n_probs_are_the_raw_distribution(http, oracle):
    logprobs, bytes_of, tokenizer = oracle
    prompt = tokenizer.encode(PROMPT)
    answer = http.post("/completion", json={"prompt": prompt, "n_predict": 6, "n_probs": 4, "seed": 4, "min_p": 0,
                                            "repeat_penalty": 1.5, "return_tokens": True, **SAMPLING}).json()
    rows = logprobs(prompt + answer["tokens"])[len(prompt) - 1:]
    for i, entry in enumerate(answer["completion_probabilities"]):
        assert entry["id"] == answer["tokens"][i] and bytes(entry["bytes"]) == bytes_of[entry["id"]]
        assert abs(entry["logprob"] - rows[i][entry["id"]].item()) < TOL
        check_alternatives(rows[i], [(a["id"], a["logprob"]) for a in entry["top_logprobs"]], 4)


def test_ollama_logprobs_are_the_raw_distribution(http, oracle):
    logprobs, bytes_of, tokenizer = oracle
    ids_of = {b: i for i, b in bytes_of.items()}
    prompt = tokenizer.encode(PROMPT)
    answer = http.post("/api/generate", json={
        "model": "tiny", "prompt": PROMPT, "raw": True, "stream": False, "logprobs": True, "top_logprobs": 3,
        "options": {"num_predict": 6, "seed": 5, "repeat_penalty": 1.5, "presence_penalty": 1.0, **SAMPLING}}).json()
    out = [ids_of[bytes(e["bytes"])] for e in answer["logprobs"]]
    rows = logprobs(prompt + out)[len(prompt) - 1:]
    for i, entry in enumerate(answer["logprobs"]):
        assert abs(entry["logprob"] - rows[i][out[i]].item()) < TOL
        check_alternatives(rows[i], [(ids_of[bytes(a["bytes"])], a["logprob"]) for a in entry["top_logprobs"]], 3)
