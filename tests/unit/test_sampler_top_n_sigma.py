"""llama.cpp's top-n-sigma sampler (worker/sampling_chain.py top_n_sigma) against src/llama-sampling.cpp
llama_sampler_top_n_sigma_apply (mask the logits below max - n * std of the finite ones; off at n <= 0), its place
first among llama.cpp's filters, and the routes that send it. It was the 400 "top-n-sigma sampling ... is not
supported"."""
import math
import random

import orjson
import pytest
import torch

from proto import pb
from worker.sampler import SamplingState, _filter

V = 40


def kept(logits: torch.Tensor, **params) -> set:
    probs = _filter(logits[None, :].clone(), [SamplingState("r", pb.SamplingParams(temperature=1.0, **params), [1], [])])
    return {i for i in range(V) if probs[0, i] > 0}


def reference(values: list, n: float) -> set:
    finite = [v for v in values if v != -math.inf]
    mean = sum(finite) / len(finite)
    std = math.sqrt(sum((v - mean) ** 2 for v in finite) / len(finite))
    return {i for i, v in enumerate(values) if v != -math.inf and not v < max(finite) - n * std}


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("n", [0.5, 1.0, 2.0])
def test_the_kept_set_is_llama_cpps(seed, n):
    rng = random.Random(seed)
    values = [rng.gauss(0, 2) for _ in range(V)]
    for i in rng.sample(range(V), 5):
        values[i] = -math.inf   # masked before it (a ban): left out of the statistics, as llama.cpp skips them
    chain = pb.SamplingParams.CHAIN_LLAMA_CPP if seed % 2 else pb.SamplingParams.CHAIN_VLLM
    assert kept(torch.tensor(values), top_n_sigma=n, chain=chain) == reference(values, n)


@pytest.mark.parametrize("n", [0.0, -1.0])
def test_off_at_zero_or_below(n):
    values = torch.tensor([float(i) for i in range(V)])
    assert kept(values, top_n_sigma=n) == set(range(V))


def test_it_runs_before_top_k_in_llama_cpps_chain():
    # Over all 40 logits 0..39 (std 11.5) n = 1 keeps 28..39; top_k 5 first would leave 35..39 (std 1.4) and n = 1
    # would then keep 38 and 39.
    values = torch.tensor([float(i) for i in range(V)])
    assert kept(values, top_n_sigma=1.0, top_k=5, chain=pb.SamplingParams.CHAIN_LLAMA_CPP) == set(range(35, 40))
    order = [pb.SamplingParams.FILTER_TOP_K, pb.SamplingParams.FILTER_TOP_N_SIGMA]
    assert kept(values, top_n_sigma=1.0, top_k=5, filter_order=order) == {38, 39}


@pytest.mark.parametrize("path, body", [("/completion", {"prompt": "hi", "n_predict": 2}),
                                        ("/api/v1/generate", {"prompt": "hi", "max_length": 2})],
                         ids=["completion", "kobold"])
async def test_the_routes_send_it(stack, path, body):
    client, fake = stack
    field = {"nsigma": 1.5} if path == "/api/v1/generate" else {"top_n_sigma": 1.5}   # KoboldCpp's name
    response = await client.post(path, data=orjson.dumps({**body, **field}))
    assert response.status == 200, await response.text()
    assert fake.script.requests[-1].sampling.top_n_sigma == 1.5
