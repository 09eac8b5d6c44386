"""The sampler on CUDA logits (worker/sampler.py samples where the logits are) against the same sampler on the host:
rows that are deterministic (greedy with penalties, logit bias and min_tokens; top_k = 1) pick the same ids, and
sampled rows only pick tokens the host's top_k / top_p filter keeps (needs a GPU)."""
import pytest
import torch

from proto import pb
from worker.sampler import Sampler, SamplingState, _filter

pytestmark = pytest.mark.gpu
V = 248320


def _states(params: list) -> list:
    return [SamplingState(f"r{i}", pb.SamplingParams(**p), [5, 6, 7, 8], [9, 10, 9]) for i, p in enumerate(params)]


def test_deterministic_rows_pick_the_host_ids():
    torch.manual_seed(0)
    logits = torch.randn(6, V) * 4
    params = [dict(temperature=0, repetition_penalty=1.3), dict(temperature=0, frequency_penalty=0.7,
              presence_penalty=0.4), dict(temperature=0, logit_bias={11: 40.0}), dict(temperature=0.8, top_k=1),
              dict(temperature=0, min_tokens=9), dict(temperature=1.0, top_k=1, seed=3, has_seed=True)]
    host = Sampler(V, seed=1).sample(logits.clone(), _states(params))
    cuda = Sampler(V, seed=1).sample(logits.cuda(), _states(params))
    assert cuda.token_ids == host.token_ids
    assert cuda.logprobs == pytest.approx(host.logprobs, abs=1e-4)


def test_sampled_rows_stay_in_the_host_filter():
    torch.manual_seed(1)
    logits = torch.randn(8, V) * 3
    params = [dict(temperature=0.7, top_p=0.8, top_k=20), dict(temperature=1.0, top_p=0.5),
              dict(temperature=0.6, min_p=0.2), dict(temperature=1.2, top_k=5, seed=7, has_seed=True)] * 2
    keep = _filter(logits.clone(), _states(params)) > 0
    sampler = Sampler(V, seed=2)
    for _ in range(20):
        out = sampler.sample(logits.cuda(), _states(params))
        assert all(bool(keep[r, t]) for r, t in enumerate(out.token_ids)), out.token_ids
    seeded = [Sampler(V, seed=s).sample(logits.cuda(), _states(params)).token_ids[3] for s in (3, 4)]
    assert seeded[0] == seeded[1]  # a seeded row does not depend on the worker's generator
