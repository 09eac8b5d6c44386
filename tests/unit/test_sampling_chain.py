"""Unit tests: the worker sampler runs its filters and penalties in the order of each API's reference server, checked
against transformers' logits processors composed in that order (an implementation independent of worker/)."""
import math

import torch
from transformers.generation.logits_process import (MinPLogitsWarper, RepetitionPenaltyLogitsProcessor,
                                                    SequenceBiasLogitsProcessor, TemperatureLogitsWarper,
                                                    TopKLogitsWarper, TopPLogitsWarper, TypicalLogitsWarper)

from proto import pb
from worker.sampler import Sampler, SamplingState

V = 50
VLLM, OLLAMA, LLAMA_CPP = (pb.SamplingParams.CHAIN_VLLM, pb.SamplingParams.CHAIN_OLLAMA,
                           pb.SamplingParams.CHAIN_LLAMA_CPP)


def logits_of(probs: dict) -> torch.Tensor:
    """[1, V]: the given probabilities on their ids, every other id far below them."""
    row = torch.full((1, V), -30.0)
    for token_id, p in probs.items():
        row[0, token_id] = math.log(p)
    return row


def oracle_support(logits: torch.Tensor, warpers: list) -> set:
    """The ids left finite after transformers' warpers, applied in the given order."""
    scores = logits.clone()
    for warper in warpers:
        scores = warper(torch.zeros(1, 1, dtype=torch.long), scores)
    return {i for i in range(V) if math.isfinite(scores[0, i].item())}


def sampled_support(logits: torch.Tensor, rows: int = 400, prompt=(1, 2), **params) -> set:
    states = [SamplingState("r", pb.SamplingParams(has_seed=True, seed=s, **params), list(prompt), [])
              for s in range(rows)]
    return set(Sampler(V, seed=1).sample(logits.repeat(rows, 1), states).token_ids)


def test_vllm_applies_min_p_before_top_p():
    """vLLM (v1 Sampler): temperature, min_p, then top_k/top_p. min_p drops id 3 first, so top_p measures the mass
    among ids 0-2 and cuts id 2 (0.5 / 0.92 + 0.3 / 0.92 > 0.82); top_p first would keep it (0.8 <= 0.82)."""
    logits = logits_of({0: 0.5, 1: 0.3, 2: 0.12, 3: 0.08})
    params = dict(temperature=1.0, min_p=0.2, top_p=0.82)
    want = oracle_support(logits, [TemperatureLogitsWarper(1.0), MinPLogitsWarper(0.2), TopPLogitsWarper(0.82)])
    assert want == {0, 1}
    assert sampled_support(logits, **params, chain=VLLM) == want


def test_ollama_keeps_top_p_before_min_p():
    """Ollama's sample.Sampler: top_k, temperature, top_p, then min_p: the same request keeps id 2."""
    logits = logits_of({0: 0.5, 1: 0.3, 2: 0.12, 3: 0.08})
    want = oracle_support(logits, [TopKLogitsWarper(V), TemperatureLogitsWarper(1.0), TopPLogitsWarper(0.82),
                                   MinPLogitsWarper(0.2)])
    assert want == {0, 1, 2}
    assert sampled_support(logits, temperature=1.0, min_p=0.2, top_p=0.82, chain=OLLAMA) == want


def test_llama_cpp_filters_before_the_temperature():
    """llama.cpp's default chain: top_k, typical_p, top_p, min_p on the untempered logits, temperature last. At
    temperature 3, min_p 0.15 of the raw distribution drops id 3 (0.05 < 0.09); after the temperature (vLLM) every
    id is within 0.15 of the most likely and stays."""
    logits = logits_of({0: 0.6, 1: 0.25, 2: 0.1, 3: 0.05})
    params = dict(temperature=3.0, min_p=0.15)
    llama_cpp = oracle_support(logits, [TopKLogitsWarper(V), TopPLogitsWarper(1.0), MinPLogitsWarper(0.15),
                                        TemperatureLogitsWarper(3.0)])
    vllm = oracle_support(logits, [TemperatureLogitsWarper(3.0), MinPLogitsWarper(0.15)])
    assert (llama_cpp, vllm) == ({0, 1, 2}, {0, 1, 2, 3})
    assert sampled_support(logits, **params, chain=LLAMA_CPP) == llama_cpp
    assert sampled_support(logits, **params, chain=VLLM) == vllm


def test_llama_cpp_runs_typical_p_before_top_p():
    """p = 0.6, 0.3, 0.1: entropy 0.898, so id 1 (surprise 1.204) is the most typical. typical_p 0.25 then top_p 0.5
    (llama.cpp) keeps id 1 alone; top_p first would keep id 0 alone (id 1 has 0.6 before it)."""
    logits = logits_of({0: 0.6, 1: 0.3, 2: 0.1})
    want = oracle_support(logits, [TopKLogitsWarper(V), TypicalLogitsWarper(0.25), TopPLogitsWarper(0.5),
                                   TemperatureLogitsWarper(1.0)])
    assert want == {1} and oracle_support(logits, [TopPLogitsWarper(0.5), TypicalLogitsWarper(0.25)]) == {0}
    assert sampled_support(logits, temperature=1.0, typical_p=0.25, top_p=0.5, chain=LLAMA_CPP) == want


def test_logit_bias_comes_before_the_repetition_penalty():
    """vLLM adds logit_bias (a non-argmax-invariant logits processor) before apply_penalties, as llama.cpp's chain
    starts with its logit_bias sampler: id 5 (logit 2, in the prompt, bias -5) is -3 * 2 = -6 after the penalty,
    below id 9's -5; penalty first would give 2 / 2 - 5 = -4 and pick id 5."""
    logits = torch.full((1, V), -100.0)
    logits[0, 5], logits[0, 9] = 2.0, -5.0
    prompt = torch.tensor([[1, 5]])
    scores = SequenceBiasLogitsProcessor({(5,): -5.0})(prompt, logits.clone())
    scores = RepetitionPenaltyLogitsProcessor(2.0)(prompt, scores)
    for chain in (VLLM, OLLAMA, LLAMA_CPP):
        row = SamplingState("r", pb.SamplingParams(temperature=0, logit_bias={5: -5.0}, repetition_penalty=2.0,
                                                   chain=chain), [1, 5], [])
        assert Sampler(V).sample(logits.clone(), [row]).token_ids == [int(scores.argmax())] == [9]


def test_llama_cpp_and_ollama_presence_and_frequency_count_the_prompt_in_the_window():
    """llama.cpp's penalties sampler counts the last penalty_last_n tokens the server accepted, the prompt's too (its
    server accepts every prompt token into the sampler), and so does Ollama's sample.Sampler (its runner Accept()s the
    prompt's tokens into the history tokenCounts reads): id 5, twice in the prompt, loses 0.5 + 2 * 0.25 and falls
    below id 6. vLLM counts the output only, so with no output yet id 5 stays the best."""
    logits = torch.zeros(1, V)
    logits[0, 5], logits[0, 6] = 1.0, 0.2
    prompt = [5, 1, 5]

    def pick(chain, window=0):
        row = SamplingState("r", pb.SamplingParams(temperature=0, presence_penalty=0.5, frequency_penalty=0.25,
                                                   repetition_window=window, chain=chain), prompt, [])
        return Sampler(V).sample(logits.clone(), [row]).token_ids[0]

    assert 1.0 - 0.5 - 2 * 0.25 < 0.2
    assert (pick(LLAMA_CPP), pick(OLLAMA), pick(VLLM)) == (6, 6, 5)
    assert pick(LLAMA_CPP, window=1) == 5  # the last token alone (1) is not id 5


def test_rows_of_different_chains_share_a_batch():
    logits = logits_of({0: 0.5, 1: 0.3, 2: 0.12, 3: 0.08})
    rows = 400
    states = [SamplingState("r", pb.SamplingParams(temperature=1.0, min_p=0.2, top_p=0.82, has_seed=True, seed=s,
                                                   chain=VLLM if s % 2 else OLLAMA), [1], []) for s in range(rows)]
    out = Sampler(V, seed=1).sample(logits.repeat(rows, 1), states).token_ids
    assert set(out[1::2]) == {0, 1} and set(out[0::2]) == {0, 1, 2}


def test_llama_cpp_top_k_then_top_p_in_one_sort_equals_the_two_steps():
    """Without typical_p, llama.cpp rows run top_k and top_p in one sort: the same tokens as the two steps."""
    from worker.sampling_chain import top_k, top_k_top_p, top_p
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(3)) * 2
    states = [SamplingState("r", pb.SamplingParams(top_k=k, top_p=p), [1], []) for k, p in ((5, 0.6), (0, 0.3),
                                                                                           (12, 1.0))]
    two_steps = top_p(top_k(logits.clone(), states), states)
    assert torch.equal(torch.isfinite(top_k_top_p(logits.clone(), states)), torch.isfinite(two_steps))


def test_vllm_top_k_keeps_every_token_tied_with_the_kth_where_llama_cpp_and_ollama_keep_k():
    """vLLM's top_k is a threshold (vllm/v1/sample/ops/topk_topp_sampler.py: logits below the k-th largest are masked,
    apply_top_k_only and apply_top_k_top_p alike), as transformers' TopKLogitsWarper: every token tied with the k-th
    stays. Ties are common where the logits come out of a bf16 LM head. llama.cpp's top_k (a partial sort cut to k)
    and Ollama's (a heap of k) keep exactly k."""
    logits = logits_of({0: 0.4, 1: 0.2, 2: 0.2, 3: 0.2})
    want = oracle_support(logits, [TemperatureLogitsWarper(1.0), TopKLogitsWarper(2)])
    assert want == {0, 1, 2, 3}
    assert sampled_support(logits, temperature=1.0, top_k=2, chain=VLLM) == want
    assert sampled_support(logits, temperature=1.0, top_k=2, top_p=0.99, chain=VLLM) == want
    for chain in (LLAMA_CPP, OLLAMA):
        kept = sampled_support(logits, temperature=1.0, top_k=2, chain=chain)
        assert len(kept) == 2 and 0 in kept


def test_top_p_drops_the_token_the_mass_before_reaches_top_p_on_vllm_and_llama_cpp_not_ollama():
    """Two tokens of probability 0.5 (exactly, in float32) at top_p 0.5: the mass before the second is 0.5. vLLM masks
    a token whose ascending cumulative sum is <= 1 - top_p (apply_top_k_top_p, as transformers' TopPLogitsWarper) and
    llama.cpp stops at the first token where the running sum is >= top_p (llama_sampler_top_p_apply): one token stays.
    Ollama's topP stops where the sum is > top_p (sample/transforms.go): both stay."""
    logits = logits_of({0: 0.5, 1: 0.5})
    want = oracle_support(logits, [TemperatureLogitsWarper(1.0), TopPLogitsWarper(0.5)])
    assert len(want) == 1
    for chain in (VLLM, LLAMA_CPP):
        assert len(sampled_support(logits, temperature=1.0, top_p=0.5, chain=chain)) == 1, chain
        assert len(sampled_support(logits, temperature=1.0, top_p=0.5, top_k=3, chain=chain)) == 1, chain
    assert sampled_support(logits, temperature=1.0, top_p=0.5, chain=OLLAMA) == {0, 1}
    assert sampled_support(logits, temperature=1.0, top_p=0.5, chain=LLAMA_CPP, filter_order=[
        pb.SamplingParams.FILTER_TOP_P, pb.SamplingParams.FILTER_TEMPERATURE]) != {0, 1}
