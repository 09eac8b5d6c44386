"""llama.cpp's mirostat samplers (worker/mirostat.py) against src/llama-sampling.cpp llama_sampler_mirostat_apply (v1)
and llama_sampler_mirostat_v2_apply (v2): the tokens each keeps for its mu, mu's update from each draw (2 tau at
first, then mu -= eta * (-log2 p - tau)), and the routes that send it. Mirostat was the 400 "mirostat sampling is not
supported"."""
import math

import orjson
import pytest
import torch

from proto import pb
from worker.mirostat import _mu, _v1_k
from worker.sampler import Sampler, SamplingState

V = 64


def zipf_logits(s: float = 1.2) -> torch.Tensor:
    """log p_i of a Zipf law over V tokens (p_i ~ 1 / (i + 1)^s): token 0 most likely."""
    return torch.tensor([[-s * math.log(i + 1) for i in range(V)]])


def state(version: int, tau: float = 3.0, eta: float = 0.1, seed: int = 1) -> SamplingState:
    params = pb.SamplingParams(temperature=1.0, mirostat=version, mirostat_tau=tau, mirostat_eta=eta, has_seed=True,
                               seed=seed)
    return SamplingState("r", params, [1], [])


def llama_cpp_v2_kept(probs: list, mu: float) -> int:
    """v2: the sorted candidates up to the first whose surprise passes mu (at least one)."""
    ranked = sorted(probs, reverse=True)
    kept = next((i for i, p in enumerate(ranked) if -math.log2(p) > mu), len(ranked))
    return max(kept, 1)


def test_v2_keeps_the_tokens_within_mu_and_moves_mu_by_each_draw():
    st, sampler = state(2), Sampler(V, seed=1)
    logits = zipf_logits()
    probs = logits.softmax(dim=-1)[0].tolist()
    mu = 6.0   # 2 tau
    for _ in range(6):
        kept = llama_cpp_v2_kept(probs, mu)
        token = sampler.sample(logits.clone(), [st]).token_ids[0]
        assert token < kept   # only the kept (most likely) tokens are drawn
        st.output_token_ids.append(token)
        drawn = probs[token] / sum(sorted(probs, reverse=True)[:kept])   # its probability after the cut
        mu -= 0.1 * (-math.log2(drawn) - 3.0)
        sampler.sample(logits.clone(), [SamplingState("other", pb.SamplingParams(temperature=1.0), [1], [])])
        # The update is read back at the row's next step: the mu it then uses is llama.cpp's after this draw.
        assert _mu(st) == pytest.approx(mu, rel=1e-5)


def test_v1_k_is_llama_cpps_formula():
    probs = sorted(zipf_logits(1.1).softmax(dim=-1)[0].tolist(), reverse=True)
    mu = 5.0
    t = [math.log((i + 2) / (i + 1)) for i in range(V - 1)]
    b = [math.log(probs[i] / probs[i + 1]) for i in range(V - 1)]
    s_hat = sum(x * y for x, y in zip(t, b)) / sum(x * x for x in t)
    eps = s_hat - 1
    k = ((eps * 2 ** mu) / (1 - V ** -eps)) ** (1 / s_hat)
    assert _v1_k(probs, mu, V) == max(int(k), 1)
    # A v1 row draws among its k most likely tokens.
    st = state(1, tau=2.5)
    tokens = {Sampler(V, seed=s).sample(zipf_logits(1.1), [st]).token_ids[0] for s in range(30)}
    assert max(tokens) < _v1_k(probs, 5.0, V)


def test_mirostat_replaces_the_filters():
    # llama.cpp runs temp then mirostat alone: a top_k of 1 beside it does not make the row greedy.
    st = SamplingState("r", pb.SamplingParams(temperature=1.0, top_k=1, mirostat=2, mirostat_tau=8.0,
                                              mirostat_eta=0.1), [1], [])
    drawn = {Sampler(V, seed=s).sample(zipf_logits(0.5), [SamplingState("r", st.params, [1], [])]).token_ids[0]
             for s in range(20)}
    assert len(drawn) > 1


@pytest.mark.parametrize("path, body", [("/completion", {"prompt": "hi", "n_predict": 2}),
                                        ("/api/v1/generate", {"prompt": "hi", "max_length": 2})],
                         ids=["completion", "kobold"])
async def test_the_routes_send_it(stack, path, body):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**body, "mirostat": 2, "mirostat_tau": 4.0,
                                                          "mirostat_eta": 0.2}))
    assert response.status == 200, await response.text()
    sent = fake.script.requests[-1].sampling
    assert (sent.mirostat, sent.mirostat_tau, sent.mirostat_eta) == (2, 4.0, pytest.approx(0.2))
