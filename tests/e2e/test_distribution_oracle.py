"""End to end: the first tokens the real sampler draws against the distribution each API's reference sampler defines,
computed here from transformers' logits of the same prompt (the `reference` fixture), by a chi-square test.

vLLM (vllm/v1/sample/sampler.py) on /v1: allowed_token_ids and bad_words masks, logit_bias, the repetition penalty
over prompt+output, then temperature, min_p, top_k and top_p; the defaults of the checkpoint's generation_config.json
(vLLM's --generation-config auto). llama.cpp's default chain (common/sampling.cpp) on /completion: top_k, top_p,
min_p on the untempered logits, the temperature last. Ollama's Go sampler (sample/samplers.go) on /api/generate:
top_k, the temperature, top_p, min_p. Each case draws a few hundred seeded first tokens (max_tokens 1); a token the
reference gives no probability fails at once."""
import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from tests.e2e.stack import DEFAULT_MODEL

PROMPT = "The quick brown fox jumps over the lazy dog. The quick brown fox"
INF = float("inf")
DRAWS = 256       # /v1: two requests of n = 128; /completion and /api/generate draw one token a request
LEAST_P = 1e-4    # every case is seeded: a correct sampler passes the same way each run


@pytest.fixture(scope="module")
def oracle(reference):
    model, tokenizer = reference
    ids = tokenizer.encode(PROMPT)
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1].float(), ids


def _top_k(x, k):
    return x if not 0 < k < x.shape[0] else x.masked_fill(x < x.topk(k).values[-1], -INF)


def _top_p(x, p):
    if p >= 1:
        return x
    probs, order = x.softmax(-1).sort(descending=True)
    return x.clone().index_fill(0, order[(probs.cumsum(0) - probs) >= p], -INF)


def _min_p(x, p):
    probs = x.softmax(-1)
    return x.masked_fill(probs < p * probs.max(), -INF) if p else x


def vllm_probs(logits, seen_ids, p: dict, output: tuple = ()) -> torch.Tensor:
    """vLLM's distribution; seen_ids: prompt + output (the repetition penalty), output: what the presence and
    frequency penalties count."""
    x = logits.clone()
    if p.get("allowed_token_ids"):
        x = torch.full_like(x, -INF).index_copy(0, torch.tensor(p["allowed_token_ids"]),
                                                x[p["allowed_token_ids"]])
    for token_id in p.get("banned", []):
        x[token_id] = -INF
    for token_id, bias in p.get("logit_bias", {}).items():
        x[int(token_id)] += bias
    penalty = p.get("repetition_penalty", 1.0)
    seen = torch.tensor(sorted(set(seen_ids)))
    x[seen] = torch.where(x[seen] > 0, x[seen] / penalty, x[seen] * penalty)
    for token_id in set(output):
        x[token_id] -= p.get("frequency_penalty", 0.0) * output.count(token_id) + p.get("presence_penalty", 0.0)
    with open(os.path.join(DEFAULT_MODEL, "generation_config.json"), encoding="utf-8") as f:
        defaults = json.load(f)
    x = x / p.get("temperature", defaults.get("temperature", 1.0))
    x = _min_p(x, p.get("min_p", 0.0))
    x = _top_p(_top_k(x, p.get("top_k", defaults.get("top_k", 0))), p.get("top_p", defaults.get("top_p", 1.0)))
    return x.softmax(-1)


def llama_cpp_probs(logits, p: dict) -> torch.Tensor:
    x = _min_p(_top_p(_top_k(logits, p["top_k"]), p["top_p"]), p["min_p"])
    return (x / p["temperature"]).softmax(-1)


def ollama_probs(logits, p: dict) -> torch.Tensor:
    return _min_p(_top_p(_top_k(logits, p["top_k"]) / p["temperature"], p["top_p"]), p["min_p"]).softmax(-1)


def chi_square_p(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """The p-value of the draws against probs, tokens expected fewer than 5 times pooled; 0 when a token the
    reference rules out was drawn."""
    if counts[probs.shape[0]:].sum() > 0:
        return 0.0
    counts = counts[:probs.shape[0]]
    if counts[probs == 0].sum() > 0:
        return 0.0
    expected = probs.double() * counts.sum()
    big = expected >= 5
    observed, wanted = list(counts[big]), list(expected[big])
    if expected[~big].sum() >= 5:
        observed.append(counts[~big].sum())
        wanted.append(expected[~big].sum())
    observed, wanted = torch.stack(observed), torch.stack(wanted)
    stat = ((observed - wanted) ** 2 / wanted).sum()
    return float(torch.special.gammaincc(torch.tensor((len(wanted) - 1) / 2.0, dtype=torch.float64), stat / 2))


def drawn(http, path: str, bodies: list, token_of) -> torch.Tensor:
    def post(body):
        response = http.post(path, json=body)
        assert response.status_code == 200, response.text
        return token_of(response.json())
    counts = torch.zeros(1024 * 1024, dtype=torch.float64)   # a token id, or a pair's first * 1024 + second
    with ThreadPoolExecutor(4) as pool:
        for token_ids in pool.map(post, bodies):
            for token_id in token_ids:
                counts[token_id if isinstance(token_id, int) else token_id[0] * 1024 + token_id[1]] += 1
    return counts


V1_CASES = {
    "defaults": {},
    "temperature-top_k": {"temperature": 0.2, "top_k": 5, "top_p": 1.0},
    "min_p-then-top_p": {"temperature": 2.0, "top_k": 0, "top_p": 0.3, "min_p": 0.8},  # top_p first: 8 tokens
    "allowed-bias-bad_words": {"temperature": 0.6, "top_k": 0, "top_p": 1.0, "allowed_token_ids": [3, 9, 40, 477, 673,
                                                                                                  853, 1000],
                               "logit_bias": {"3": 4.0, "9": 3.5}, "bad_words": ["ist"], "banned": [477]},
    "repetition_penalty": {"temperature": 0.3, "top_k": 0, "top_p": 1.0, "repetition_penalty": 1.6,
                           "logit_bias": {"347": 7.0, "417": 6.5}},
}


@pytest.mark.parametrize("name", list(V1_CASES))
def test_v1_draws_follow_vllms_distribution(http, oracle, name):
    logits, prompt = oracle
    params = V1_CASES[name]
    body = {k: v for k, v in params.items() if k != "banned"}
    bodies = [{**body, "prompt": prompt, "max_tokens": 1, "n": 128, "seed": 1000 * s + 7, "return_token_ids": True}
              for s in range(DRAWS // 128)]
    counts = drawn(http, "/v1/completions", bodies, lambda j: [c["token_ids"][0] for c in j["choices"]])
    assert chi_square_p(counts, vllm_probs(logits, prompt, params)) > LEAST_P


# Where the orders part: on this prompt llama.cpp's chain keeps 3 tokens, Ollama's 14 (vLLM's would keep 4).
PENALIZED = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "allowed_token_ids": [3, 477, 853], "logit_bias": {"3": 1.0},
             "presence_penalty": 1.0, "frequency_penalty": 0.5, "repetition_penalty": 1.5}


def test_v1_second_tokens_follow_penalties_on_the_output(http, reference, oracle):
    """(first, second) token pairs: the second token's distribution has the presence / frequency penalties of the
    first (vLLM counts the output) and the repetition penalty of prompt + first token."""
    logits, prompt = oracle
    allowed = PENALIZED["allowed_token_ids"]
    first = vllm_probs(logits, prompt, PENALIZED).double()
    joint = torch.zeros(1024 * 1024, dtype=torch.float64)
    for a in allowed:
        with torch.no_grad():
            after = reference[0](torch.tensor([prompt + [a]])).logits[0, -1].float()
        second = vllm_probs(after, prompt + [a], PENALIZED, output=[a]).double()
        for b in allowed:
            joint[a * 1024 + b] = first[a] * second[b]
    bodies = [{**PENALIZED, "prompt": prompt, "max_tokens": 2, "n": 128, "seed": 1000 * s + 5, "ignore_eos": True,
               "return_token_ids": True} for s in range(DRAWS // 128)]
    pairs = drawn(http, "/v1/completions", bodies, lambda j: [c["token_ids"] for c in j["choices"]])
    assert chi_square_p(pairs, joint) > LEAST_P


CHAIN = {"temperature": 3.0, "top_k": 0, "top_p": 0.3, "min_p": 0.8}


def test_llama_cpp_draws_filter_before_the_temperature(http, oracle):
    logits, prompt = oracle
    bodies = [{**CHAIN, "prompt": prompt, "n_predict": 1, "seed": 11 * s + 1, "return_tokens": True}
              for s in range(DRAWS // 2)]
    counts = drawn(http, "/completion", bodies, lambda j: j["tokens"])
    assert chi_square_p(counts, llama_cpp_probs(logits, CHAIN)) > LEAST_P


def test_ollama_draws_follow_its_samplers_order(http, oracle, reference):
    logits, _ = oracle
    params = CHAIN
    byte_ids = token_bytes(reference[1])
    bodies = [{"model": "tiny", "prompt": PROMPT, "raw": True, "stream": False, "logprobs": True,
               "options": {**params, "num_predict": 1, "seed": 13 * s + 2, "repeat_penalty": 1.0}}
              for s in range(3 * DRAWS // 4)]
    counts = drawn(http, "/api/generate", bodies, lambda j: [byte_ids[bytes(j["logprobs"][0]["bytes"])]])
    assert chi_square_p(counts, ollama_probs(logits, params)) > LEAST_P


def _byte_table() -> dict:
    """GPT-2's byte-level BPE alphabet read backwards: character -> byte (printable bytes are themselves, the others
    the characters from U+0100 on, in byte order)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
            *range(ord("\u00ae"), ord("\u00ff") + 1)]
    moved = [b for b in range(256) if b not in kept]
    return {**{chr(b): b for b in kept}, **{chr(256 + i): b for i, b in enumerate(moved)}}


def token_bytes(tokenizer) -> dict:
    """bytes of each vocabulary token -> its id (added tokens by their text)."""
    table = _byte_table()
    return {(bytes(table[c] for c in t) if all(c in table for c in t) else t.encode()): i
            for t, i in tokenizer.get_vocab().items()}
