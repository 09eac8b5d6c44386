"""llama.cpp's `samplers` (the order of its sampler chain; it was ignored as an unknown field): read as its server
reads it, sent to the worker as filter_order, run in that order (checked against transformers' warpers)."""
import math

import orjson
import pytest
import torch
from transformers.generation.logits_process import MinPLogitsWarper, TemperatureLogitsWarper, TopKLogitsWarper

from gateway.llama_cpp_samplers import DEFAULT_SAMPLERS, sampler_names
from proto import pb
from worker.sampler import Sampler, SamplingState

V = 50
F = pb.SamplingParams


@pytest.mark.parametrize("value, names", [
    (["top_k", "Top-P", "typ", "temp", "minp", "penalties", "nucleus", "unknown"],
     ["top_k", "top_p", "typ_p", "temperature", "min_p", "penalties", "top_p"]),
    ("ekyptq", ["penalties", "top_k", "typ_p", "top_p", "temperature"]),
    ([], []),
], ids=["names", "chars", "empty"])
def test_names_are_read_as_llama_cpp_reads_them(value, names):
    """common_sampler_types_from_names (lower-cased; canonical, kebab-case, underscore-free, nucleus, temp, typ) and
    _from_chars; an unknown name or character is skipped."""
    assert sampler_names(value) == names


async def _completion(client, fake, **fields):
    response = await client.post("/completion", data=orjson.dumps({"prompt": "hi", "n_predict": 2, **fields}))
    body = orjson.loads(await response.read())
    assert response.status == 200, body
    return body, fake.script.requests[-1].sampling


async def test_completion_sends_the_order(stack):
    client, fake = stack
    body, sampling = await _completion(client, fake, samplers=["penalties", "temperature", "min_p", "top_k"],
                                       temperature=0.5, repeat_penalty=1.3)
    assert list(sampling.filter_order) == [F.FILTER_TEMPERATURE, F.FILTER_MIN_P, F.FILTER_TOP_K]
    assert round(sampling.repetition_penalty, 6) == 1.3 and round(sampling.temperature, 6) == 0.5
    assert body["generation_settings"]["samplers"] == ["penalties", "temperature", "min_p", "top_k"]


async def test_left_out_penalties_and_temperature_do_not_apply(stack):
    """Without "penalties" llama.cpp applies none; without "temperature" it draws from the filtered distribution as
    it is, so temperature 0 does not make it greedy."""
    client, fake = stack
    _, sampling = await _completion(client, fake, samplers="kp", temperature=0, repeat_penalty=1.3,
                                    presence_penalty=0.5, frequency_penalty=0.5)
    assert list(sampling.filter_order) == [F.FILTER_TOP_K, F.FILTER_TOP_P]
    assert (sampling.repetition_penalty, sampling.presence_penalty, sampling.frequency_penalty) == (1.0, 0.0, 0.0)
    assert sampling.temperature == 1.0
    _, sampling = await _completion(client, fake, samplers=[])
    assert list(sampling.filter_order) == [F.FILTER_NONE]


async def test_default_order_is_stated(stack):
    client, fake = stack
    body, sampling = await _completion(client, fake)
    assert list(sampling.filter_order) == [] and body["generation_settings"]["samplers"] == DEFAULT_SAMPLERS
    props = await (await client.get("/props")).json()
    assert props["default_generation_settings"]["params"]["samplers"] == DEFAULT_SAMPLERS


def support(logits, rows=400, **params) -> set:
    states = [SamplingState("r", pb.SamplingParams(has_seed=True, seed=s, **params), [1], []) for s in range(rows)]
    return set(Sampler(V, seed=1).sample(logits.repeat(rows, 1), states).token_ids)


def oracle(logits, warpers) -> set:
    scores = logits.clone()
    for warper in warpers:
        scores = warper(torch.zeros(1, 1, dtype=torch.long), scores)
    return {i for i in range(V) if math.isfinite(scores[0, i].item())}


def test_worker_runs_the_filters_in_the_order_sent():
    """p = 0.6, 0.25, 0.1, 0.05: min_p 0.15 before temperature 3 drops id 3; after it (temperature first) keeps it."""
    logits = torch.full((1, V), -30.0)
    for token_id, p in enumerate([0.6, 0.25, 0.1, 0.05]):
        logits[0, token_id] = math.log(p)
    params = dict(temperature=3.0, min_p=0.15, chain=F.CHAIN_LLAMA_CPP)
    min_p_first = oracle(logits, [MinPLogitsWarper(0.15), TemperatureLogitsWarper(3.0)])
    temp_first = oracle(logits, [TemperatureLogitsWarper(3.0), MinPLogitsWarper(0.15)])
    assert (min_p_first, temp_first) == ({0, 1, 2}, {0, 1, 2, 3})
    assert support(logits, **params, filter_order=[F.FILTER_MIN_P, F.FILTER_TEMPERATURE]) == min_p_first
    assert support(logits, **params, filter_order=[F.FILTER_TEMPERATURE, F.FILTER_MIN_P]) == temp_first
    # Only top_k listed: min_p and the temperature do not run (top_k 3 keeps ids 0-2, whatever min_p says).
    only_k = oracle(logits, [TopKLogitsWarper(3)])
    assert support(logits, **params, top_k=3, filter_order=[F.FILTER_TOP_K]) == only_k == {0, 1, 2}
    # [FILTER_NONE]: no filter at all, top_k included.
    assert support(logits, rows=600, **{**params, "temperature": 1.0}, top_k=1,
                   filter_order=[F.FILTER_NONE]) == {0, 1, 2, 3}


@pytest.mark.parametrize("path,body", [("/completion", {"prompt": "hi", "n_predict": 2}),
                                       ("/v1/completions", {"prompt": "hi", "max_tokens": 2})],
                         ids=["completion", "v1"])
async def test_adaptive_p_with_a_target_is_refused_not_ignored(stack, path, body):
    """llama.cpp's adaptive-p replaces the final draw when `samplers` names adaptive_p and adaptive_target is 0 or
    more (common/sampling.cpp; -1, its default, is off): it changed the output there and was ignored here."""
    client, fake = stack
    on = {**body, "samplers": ["top_k", "min_p", "temperature", "adaptive_p"], "adaptive_target": 0.3,
          "adaptive_decay": 0.9}
    response = await client.post(path, json=on)
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "adaptive_target" and "adaptive-p" in error["message"]
    assert not fake.script.requests
    # SillyTavern's llama.cpp defaults (public/scripts/textgen-settings: LLAMACPP_DEFAULT_ORDER ends in adaptive_p,
    # adaptive_target -0.01) are off, as they are in llama.cpp.
    sillytavern = {**body, "samplers": ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc",
                                        "temperature", "adaptive_p"], "adaptive_target": -0.01, "adaptive_decay": 0.9}
    for served in ({**on, "adaptive_target": -1}, {**on, "samplers": ["top_k", "temperature"]}, sillytavern):
        assert (await client.post(path, json=served)).status == 200
