"""llama.cpp's min_keep (it was ignored as an unknown field): top_p, min_p and typical_p keep at least that many tokens,
as llama.cpp's samplers do (src/llama-sampling.cpp: top_p stops only once i + 1 >= min_keep, min_p and typical_p
likewise); top_k and the temperature ignore it."""
import math

import pytest
import torch

from proto import pb
from worker.sampler import SamplingState
from worker.sampling_chain import filter_probs

V = 50
PROBS = [0.7, 0.15, 0.08, 0.04, 0.03]   # ids 0-4, the rest far below


def kept(**params) -> set:
    logits = torch.full((1, V), -30.0)
    for token_id, p in enumerate(PROBS):
        logits[0, token_id] = math.log(p)
    probs = filter_probs(logits, [SamplingState("r", pb.SamplingParams(temperature=1.0, **params), [1], [])])
    return {i for i in range(V) if probs[0, i] > 0}


@pytest.mark.parametrize("params, without, with_three", [
    ({"top_p": 0.5}, {0}, {0, 1, 2}),
    ({"min_p": 0.5}, {0}, {0, 1, 2}),
    ({"typical_p": 0.01}, 1, 3),
    ({"top_k": 1}, {0}, {0}),
], ids=["top_p", "min_p", "typical_p", "top_k-ignores-it"])
def test_min_keep_keeps_that_many(params, without, with_three):
    for chain in (pb.SamplingParams.CHAIN_LLAMA_CPP, pb.SamplingParams.CHAIN_VLLM):
        plain, three = kept(chain=chain, **params), kept(chain=chain, min_keep=3, **params)
        if isinstance(without, int):    # typical_p keeps the tokens nearest the entropy: count them
            assert (len(plain), len(three)) == (without, with_three)
        else:
            assert (plain, three) == (without, with_three)


async def test_gateway_sends_it(stack):
    client, fake = stack
    for sent, wire in ((3, 3), (-2, 0), (10 ** 12, None)):
        response = await client.post("/completion", json={"prompt": "hi", "n_predict": 1, "min_keep": sent})
        assert response.status == 200, await response.text()
        value = fake.script.requests[-1].sampling.min_keep
        assert value == wire if wire is not None else value > 0
        assert (await response.json())["generation_settings"]["min_keep"] == value
