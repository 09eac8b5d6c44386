"""llama.cpp's DRY sampler (worker/dry.py) against src/llama-sampling.cpp llama_sampler_dry_apply: its comment's
example, a brute-force reading of its definition (a token's penalty grows with the longest earlier sequence that it
would continue to the context's end), its sequence breakers and its switches; and the routes that send it."""
import json
import math
import random

import orjson
import pytest
import torch

from proto import pb
from worker.dry import dry_penalties
from worker.sampler import Sampler, SamplingState

A, B, C, Y = 1, 2, 3, 4


def params(**kw):
    base = {"dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": -1}
    return pb.SamplingParams(**{**base, **kw})


def test_llama_cpps_example():
    # "Last N tokens: a b c c b c y a b c / Repeat counts: 0 0 3 1 0 2 0 0 0 0": c would make `a b c` a b c c (3),
    # y would continue `b c` (2); with allowed length 2: c loses 0.8 * 1.75, y 0.8.
    got = dry_penalties([A, B, C, C, B, C, Y, A, B, C], params(), {})
    assert got == pytest.approx({C: 0.8 * 1.75, Y: 0.8})


def brute(history: list, p, heads: dict) -> dict:
    """The definition, quadratic: the match length back from each earlier position against the end, capped where the
    latest breaker (a head whose tail precedes it) stands."""
    n = len(history) if p.dry_penalty_last_n < 0 else min(len(history), p.dry_penalty_last_n)
    tokens, limit = history[-n:], n
    for i in range(n):   # i tokens from the end
        tails = heads.get(tokens[n - 1 - i], [])
        matched = [len(t) for t in tails if len(t) <= i and all(t[o] == tokens[n - i + o] for o in range(len(t)))]
        if matched:
            limit = i - max(matched)
            break
    if n <= p.dry_allowed_length or limit < p.dry_allowed_length:
        return {}
    best = {}
    for j in range(n - 1):   # a match ending at j, continued by tokens[j + 1]
        length = 0
        while length <= j and tokens[j - length] == tokens[n - 1 - length] and j - length != n - 1 - length:
            length += 1
        length = min(length, limit)
        if length >= p.dry_allowed_length:
            best[tokens[j + 1]] = max(best.get(tokens[j + 1], 0), length)
    return {t: p.dry_multiplier * p.dry_base ** (length - p.dry_allowed_length) for t, length in best.items()
            if not any(not tail for tail in heads.get(t, []))}


@pytest.mark.parametrize("seed", range(40))
def test_random_histories_match_the_definition(seed):
    rng = random.Random(seed)
    history = [rng.choice([A, B, C, Y]) for _ in range(rng.randint(1, 60))]
    heads = {Y: [[]]} if seed % 3 == 0 else ({B: [[A]]} if seed % 3 == 1 else {})
    p = params(dry_allowed_length=rng.choice([1, 2, 3]), dry_penalty_last_n=rng.choice([-1, 8, 30]))
    assert dry_penalties(history, p, heads) == pytest.approx(brute(history, p, heads))


def test_a_breaker_cuts_the_repetition():
    history = [A, B, C, Y, A, B, C]
    assert dry_penalties(history, params(), {}) == pytest.approx({Y: 0.8 * 1.75})
    # Y (a single-token breaker) ends every match at it: `a b c` after it is 3 long but may not reach back past it.
    assert dry_penalties(history, params(), {Y: [[]]}) == {}


@pytest.mark.parametrize("off", [{"dry_multiplier": 0}, {"dry_base": 0.5}, {"dry_penalty_last_n": 0}])
def test_off_switches(off):
    state = SamplingState("r", pb.SamplingParams(temperature=0, **{**dict(dry_multiplier=0.8, dry_base=1.75,
                          dry_allowed_length=2, dry_penalty_last_n=-1), **off}), [A, B, C, A, B], [])
    logits = torch.zeros(1, 8)
    logits[0, C] = 1.0
    assert Sampler(8, seed=1).sample(logits, [state]).token_ids == [C]


def test_a_greedy_row_takes_the_penalised_logits():
    state = SamplingState("r", params(temperature=0), [A, B, C, A, B], [])
    logits = torch.zeros(1, 8)
    logits[0, C], logits[0, Y] = 1.0, 0.9   # C would continue `a b` (2): 1.0 - 0.8 < 0.9
    assert Sampler(8, seed=1).sample(logits, [state]).token_ids == [Y]
    assert dry_penalties([A, B, C, A, B], params(), {})[C] == pytest.approx(0.8)


ROUTES = [("/completion", {"prompt": "hi", "n_predict": 2}),
          ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
          ("/api/v1/generate", {"prompt": "hi", "max_length": 2})]


@pytest.mark.parametrize("path, body", ROUTES, ids=["completion", "chat", "kobold"])
async def test_the_routes_send_dry_with_its_breakers_found_in_the_vocabulary(stack, path, body):
    # It was the 400 "DRY sampling (llama.cpp's dry_multiplier above 0) is not supported" on each. SillyTavern sends
    # its breakers to KoboldCpp as JSON text.
    client, fake = stack
    breakers = '["\\n", "*"]' if path == "/api/v1/generate" else ["\n", "*"]
    dry = {"dry_multiplier": 0.8, "dry_base": 1.5, "dry_allowed_length": 3, "dry_penalty_last_n": 256,
           "dry_sequence_breakers": breakers}
    response = await client.post(path, data=orjson.dumps({**body, **dry}))
    assert response.status == 200, await response.text()
    sent = fake.script.requests[-1].sampling
    assert (sent.dry_multiplier, sent.dry_base, sent.dry_allowed_length, sent.dry_penalty_last_n) == \
        (pytest.approx(0.8), 1.5, 3, 256)
    heads = {seq.ids[0] for seq in sent.dry_sequence_breakers if len(seq.ids) == 1}
    holding = {i for i in range(fake.tokenizer.get_vocab_size()) if any(
        b in fake.tokenizer.decode([i], skip_special_tokens=False) for b in ("\n", "*"))}
    assert heads == holding and heads
    if path == "/completion":
        settings = orjson.loads(await response.read())["generation_settings"]
        assert (settings["dry_multiplier"], settings["dry_sequence_breakers"]) == (0.8, ["\n", "*"])


async def test_an_empty_breaker_list_is_llama_cpps_400(stack):
    client, fake = stack
    response = await client.post("/completion", data=orjson.dumps({"prompt": "hi", "dry_multiplier": 0.8,
                                                                    "dry_sequence_breakers": []}))
    error = (await response.json())["error"]
    assert response.status == 400 and error["message"] == "Error: dry_sequence_breakers must be a non-empty array of " \
        "strings" and not fake.script.requests


@pytest.mark.parametrize("value, held", [(10 ** 19, 2 ** 31 - 1), (-(10 ** 19), -(2 ** 31))])
async def test_a_length_or_window_past_int32_is_held_to_it(stack, value, held):
    # Both ride the wire as int32 (pb.SamplingParams): 1e19 was a 500 'Value out of range' (test_hostile_inputs).
    client, fake = stack
    body = {"prompt": "hi", "n_predict": 2, "dry_multiplier": 0.8, "dry_allowed_length": value}
    response = await client.post("/completion", data=json.dumps({**body, "dry_penalty_last_n": abs(value)}))
    assert response.status == 200, await response.text()
    sent = fake.script.requests[-1].sampling
    assert (sent.dry_allowed_length, sent.dry_penalty_last_n) == (held, 2 ** 31 - 1)
