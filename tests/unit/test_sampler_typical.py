"""Unit tests: the worker sampler's locally typical sampling (Ollama's and llama.cpp's typical_p)."""
import math

import pytest
import torch

from proto import pb
from worker.sampler import Sampler, SamplingState, _filter

V = 50
# p = 0.5, 0.3, 0.2 on ids 3, 7, 11: entropy 1.030; surprises 0.693, 1.204, 1.609, so by distance from the entropy
# the order is id 7 (0.174), id 3 (0.337), id 11 (0.580).
PROBS = {3: 0.5, 7: 0.3, 11: 0.2}


def state(**params):
    return SamplingState("r", pb.SamplingParams(**params), [1, 2], [])


def three_token_logits(rows: int) -> torch.Tensor:
    logits = torch.full((rows, V), -math.inf)
    for token_id, p in PROBS.items():
        logits[:, token_id] = math.log(p)
    return logits


@pytest.mark.parametrize("typical_p,kept", [
    (0.5, {7, 3}), (0.2, {7}), (0.3, {7, 3}), (1e-9, {7}), (1.0, {3, 7, 11}), (0.0, {3, 7, 11}),
], ids=["0.5", "0.2", "0.3 (mass before id 3 is 0.3, not past it)", "least", "1 is off", "0 is unset"])
def test_typical_p_keeps_the_tokens_nearest_the_entropy(typical_p, kept):
    probs = _filter(three_token_logits(1), [state(temperature=1.0, typical_p=typical_p)])
    assert {i for i in range(V) if probs[0, i] > 0} == kept


def test_typical_rows_sample_only_kept_tokens_and_leave_neighbours_whole():
    rows = 600
    states = [state(temperature=1.0, typical_p=0.5, has_seed=True, seed=s) for s in range(rows // 2)]
    states += [state(temperature=1.0, has_seed=True, seed=s) for s in range(rows // 2)]
    out = Sampler(V, seed=1).sample(three_token_logits(rows), states)
    assert set(out.token_ids[:rows // 2]) == {3, 7}
    assert set(out.token_ids[rows // 2:]) == {3, 7, 11}
    # Logprobs stay the model's, whatever the filter kept.
    assert out.logprobs[0] == pytest.approx(math.log(PROBS[out.token_ids[0]]), abs=1e-5)
