"""llama.cpp's XTC sampler (exclude top choices): the worker's step against llama.cpp's llama_sampler_xtc_apply
(common/sampling.cpp: with probability xtc_probability, the tokens at or above xtc_threshold but the least likely of
them are removed, when that leaves min_keep; off at probability 0 or a threshold above 0.5), its place in llama.cpp's
chain (after min_p, before the temperature), and the routes that send it (llama.cpp's /completion and /v1 fields,
KoboldCpp's generate, LM Studio's SDK). It was the 400 "XTC sampling ... is not supported" on each."""
import math

import orjson
import pytest
import torch

from proto import pb
from worker.sampler import Sampler, SamplingState, _filter

V = 50
PROBS = {3: 0.5, 7: 0.3, 11: 0.2}


def state(seed=None, **params):
    if seed is not None:
        params.update(has_seed=True, seed=seed)
    return SamplingState("r", pb.SamplingParams(temperature=1.0, **params), [1, 2], [])


def logits(rows: int = 1) -> torch.Tensor:
    out = torch.full((rows, V), -math.inf)
    for token_id, p in PROBS.items():
        out[:, token_id] = math.log(p)
    return out


def kept(**params) -> set:
    probs = _filter(logits(), [state(**params)])
    return {i for i in range(V) if probs[0, i] > 0}


def llama_cpp_xtc(probs: dict, threshold: float, min_keep: int = 0) -> set:
    """llama_sampler_xtc_apply once its draw fired: candidates sorted by probability, pos_last the last at or above
    the threshold, the first pos_last removed when size - pos_last >= min_keep and pos_last > 0."""
    ranked = sorted(probs, key=probs.get, reverse=True)
    pos_last = max((i for i, t in enumerate(ranked) if probs[t] >= threshold), default=0)
    if threshold > 0.5 or not (len(ranked) - pos_last >= min_keep and pos_last > 0):
        return set(ranked)
    return set(ranked[pos_last:])


@pytest.mark.parametrize("threshold, min_keep", [(0.1, 0), (0.25, 0), (0.3, 0), (0.4, 0), (0.6, 0), (0.1, 2),
                                                 (0.1, 1), (0.25, 2), (0.25, 3), (0.55, 0)])
@pytest.mark.parametrize("chain", [pb.SamplingParams.CHAIN_LLAMA_CPP, pb.SamplingParams.CHAIN_VLLM])
def test_a_firing_xtc_keeps_what_llama_cpp_keeps(threshold, min_keep, chain):
    assert kept(xtc_probability=1.0, xtc_threshold=threshold, min_keep=min_keep, chain=chain) == \
        llama_cpp_xtc(PROBS, threshold, min_keep)


def test_off_at_probability_zero():
    assert kept(xtc_probability=0.0, xtc_threshold=0.1) == set(PROBS)


def test_it_runs_after_top_k_on_the_renormalised_distribution_as_llama_cpps_chain():
    # top_k 2 leaves 0.625 / 0.375: both pass 0.3, so XTC keeps id 7 alone. Run first, it would remove id 3 of the
    # three and top_k would then keep ids 7 and 11.
    assert kept(xtc_probability=1.0, xtc_threshold=0.3, top_k=2, chain=pb.SamplingParams.CHAIN_LLAMA_CPP) == {7}
    # As a step of a request's own order (llama.cpp's `samplers`), where it is listed.
    order = [pb.SamplingParams.FILTER_XTC, pb.SamplingParams.FILTER_TOP_K]
    assert kept(xtc_probability=1.0, xtc_threshold=0.3, top_k=2, filter_order=order) == {7, 11}


def test_the_draw_fires_at_its_rate_and_a_seeded_row_depends_on_its_seed_and_step_only():
    rows = 2000
    states = [state(seed=s, xtc_probability=0.3, xtc_threshold=0.1) for s in range(rows)]
    out = Sampler(V, seed=1).sample(logits(rows), states).token_ids
    elevens = sum(1 for t in out if t == 11)
    # Fired rows draw id 11 only; the others draw it 20 % of the time: P(11) = 0.3 + 0.7 * 0.2 = 0.44.
    assert abs(elevens / rows - 0.44) < 0.04
    again = Sampler(V, seed=2).sample(logits(rows), states[::-1]).token_ids[::-1]
    assert again == out


ROUTES = [("/completion", {"prompt": "hi", "n_predict": 2}),
          ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
          ("/api/v1/generate", {"prompt": "hi", "max_length": 2})]


@pytest.mark.parametrize("path, body", ROUTES, ids=["completion", "chat", "kobold"])
async def test_the_routes_send_xtc_to_the_scheduler(stack, path, body):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**body, "xtc_probability": 0.5, "xtc_threshold": 0.2}))
    assert response.status == 200, await response.text()
    sent = fake.script.requests[-1].sampling
    assert (sent.xtc_probability, sent.xtc_threshold) == (0.5, pytest.approx(0.2))
    if path == "/completion":
        settings = orjson.loads(await response.read())["generation_settings"]
        assert (settings["xtc_probability"], settings["xtc_threshold"]) == (0.5, 0.2)


async def test_samplers_naming_xtc_place_it_in_the_order(stack):
    client, fake = stack
    body = {"prompt": "hi", "n_predict": 2, "samplers": ["top_k", "xtc", "temperature"], "xtc_probability": 0.5}
    assert (await client.post("/completion", data=orjson.dumps(body))).status == 200
    assert list(fake.script.requests[-1].sampling.filter_order) == [
        pb.SamplingParams.FILTER_TOP_K, pb.SamplingParams.FILTER_XTC, pb.SamplingParams.FILTER_TEMPERATURE]


async def test_lm_studios_sdk_xtc_setting_is_sent(stack):
    from tests.unit.test_lmstudio_sdk import _channel, _predict, _session

    client, fake = stack
    fields = [{"key": "llm.prediction.llama.xtcProbability", "value": {"checked": True, "value": 0.5}},
              {"key": "llm.prediction.llama.xtcThreshold", "value": {"checked": True, "value": 0.25}}]
    messages = await _channel(await _session(client), _predict(fields))
    assert messages[-1]["type"] == "channelClose", messages[-1]
    sent = fake.script.requests[-1].sampling
    assert (sent.xtc_probability, sent.xtc_threshold) == (0.5, 0.25)
