"""vLLM's bad_words (they were a 400 unsupported): the worker masks as vLLM's apply_bad_words does, checked against
transformers' NoBadWordsLogitsProcessor; the gateway tokenizes each word as vLLM's SamplingParams does."""
import math

import orjson
import pytest
import torch
from transformers.generation.logits_process import NoBadWordsLogitsProcessor

from proto import pb
from worker.sampler import Sampler, SamplingState

V = 50


def row(outputs=(), **params) -> SamplingState:
    return SamplingState("r", pb.SamplingParams(**params), [1, 2], list(outputs))


@pytest.mark.parametrize("outputs", [(), (9,), (9, 5), (5, 9)], ids=["none", "prefix", "ends-5", "prefix-at-end"])
def test_bad_words_mask_the_last_token_after_the_rest(outputs):
    """Bad words [7] and [5, 9, 11]: id 7 never; id 11 only right after 5, 9 (vLLM matches the output only)."""
    logits = torch.zeros(1, V)
    logits[0, 7], logits[0, 11], logits[0, 12] = 3.0, 2.0, 1.0
    words = [[7], [5, 9, 11]]
    oracle = NoBadWordsLogitsProcessor(words, eos_token_id=V - 1)(torch.tensor([[0, *outputs]]), logits.clone())
    state = row(outputs, temperature=0, bad_words=[pb.TokenIds(ids=w) for w in words])
    out = Sampler(V).sample(logits.clone(), [state])
    assert out.token_ids == [int(oracle.argmax())] == [12 if outputs == (5, 9) else 11]
    assert not math.isfinite(oracle[0, 7].item())
    # Logprobs stay the raw distribution's (vLLM's raw_logprobs), whatever was masked.
    assert out.logprobs[0] == pytest.approx(logits[0].log_softmax(-1)[out.token_ids[0]].item(), abs=1e-6)


def test_a_bad_word_never_appears_when_sampled():
    logits = torch.zeros(1, V)
    logits[0, 7], logits[0, 8] = 2.0, 2.0
    rows = [row(temperature=1.0, bad_words=[pb.TokenIds(ids=[7])], has_seed=True, seed=s) for s in range(200)]
    picked = set(Sampler(V).sample(logits.repeat(200, 1), rows).token_ids)
    assert 8 in picked and 7 not in picked


async def test_gateway_tokenizes_them_as_vllm(stack):
    client, fake = stack
    body = {"prompt": "hi", "max_tokens": 2, "bad_words": ["user", "Hello"]}
    response = await client.post("/v1/completions", data=orjson.dumps(body))
    assert response.status == 200, await response.text()

    def ids(text):
        return fake.tokenizer.encode(text, add_special_tokens=False).ids
    # vLLM keeps the spaced form only where it starts with another token and has as many tokens: " user" is one
    # token of its own, " Hello" two (a space, then "Hello").
    assert len(ids(" user")) == 1 and len(ids(" Hello")) == 2
    sent = fake.script.requests[-1].sampling.bad_words
    assert [list(w.ids) for w in sent] == [ids("user"), ids(" user"), ids("Hello")]
