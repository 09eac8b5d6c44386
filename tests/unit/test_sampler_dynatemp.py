"""llama.cpp's dynamic temperature (worker/sampling_chain.py temperature) against src/llama-sampling.cpp
llama_sampler_temp_ext_apply: the temperature is low + (t + d - low) * (entropy / log(size)) ^ exponent, low =
max(0, t - d), over the candidates the filters before it left. It was the 400 "dynamic temperature ... is not
supported"."""
import math
import random

import orjson
import pytest
import torch

from proto import pb
from worker.sampler import SamplingState, _filter

V = 30


def probs(values: list, **params) -> list:
    state = SamplingState("r", pb.SamplingParams(**params), [1], [])
    return _filter(torch.tensor([values]), [state])[0].tolist()


def reference(values: list, t: float, d: float, exponent: float) -> list:
    finite = [v for v in values if v != -math.inf]
    top = max(finite)
    p = [math.exp(v - top) if v != -math.inf else 0.0 for v in values]
    total = sum(p)
    p = [x / total for x in p]
    entropy = -sum(x * math.log(x) for x in p if x > 0)
    low, high = max(0.0, t - d), t + d
    dyn = low + (high - low) * (entropy / math.log(len(finite))) ** exponent
    e = [math.exp((v - top) / dyn) if v != -math.inf else 0.0 for v in values]
    return [x / sum(e) for x in e]


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("t, d, exponent", [(1.0, 0.5, 1.0), (0.7, 0.6, 2.0), (1.5, 1.0, 0.5)])
def test_the_distribution_is_llama_cpps(seed, t, d, exponent):
    rng = random.Random(seed)
    values = [rng.gauss(0, 3) for _ in range(V)]
    values[rng.randrange(V)] = -math.inf
    chain = pb.SamplingParams.CHAIN_LLAMA_CPP if seed % 2 else pb.SamplingParams.CHAIN_VLLM
    got = probs(values, temperature=t, dynatemp_range=d, dynatemp_exponent=exponent, chain=chain)
    assert got == pytest.approx(reference(values, t, d, exponent), abs=1e-5)


def test_off_at_range_zero_is_the_plain_temperature():
    values = [float(i % 7) for i in range(V)]
    plain = torch.tensor([values]).div(0.8).softmax(dim=-1)[0].tolist()
    assert probs(values, temperature=0.8, dynatemp_range=0.0, dynatemp_exponent=3.0) == pytest.approx(plain)


async def test_the_completion_route_sends_it(stack):
    client, fake = stack
    body = {"prompt": "hi", "n_predict": 2, "dynatemp_range": 0.4, "dynatemp_exponent": 1.5}
    response = await client.post("/completion", data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    sent = fake.script.requests[-1].sampling
    assert (sent.dynatemp_range, sent.dynatemp_exponent) == (pytest.approx(0.4), 1.5)
    settings = orjson.loads(await response.read())["generation_settings"]
    assert (settings["dynatemp_range"], settings["dynatemp_exponent"]) == (0.4, 1.5)
