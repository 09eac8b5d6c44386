"""Worker process: the filters of sampled rows (temperature, min_p, top_k, top_p, typical_p, XTC, top-n-sigma), in the
order of the reference server of the API each request came through (pb.SamplingParams.chain).

vLLM's v1 Sampler (vllm/v1/sample/sampler.py, and the GPU runner's vllm/v1/worker/gpu/sample/sampler.py) divides by
the temperature, then applies min_p, then top_k (a threshold: the tokens tied with the k-th stay) and top_p.
llama.cpp's default chain (common/common.h common_params_sampling::samplers) runs top_k, typical_p, top_p and min_p on
the untempered logits and the temperature last. Ollama's sample.Sampler (sample/samplers.go) runs top_k, the
temperature, top_p, then min_p. The order changes which tokens survive: top_p after min_p measures mass among fewer
tokens, and min_p or top_p before the temperature cut a different set than after it.
"""
import random

import torch

from proto import pb
from worker.batch import to_device
from worker.mirostat import mirostat, mirostat_on, note_draws  # noqa: F401 - note_draws: the sampler's, from here

MASK = float("-inf")


def temperature(logits: torch.Tensor, states: list) -> torch.Tensor:
    """logits [M, V] divided row-wise by each state's temperature; a row with llama.cpp's dynatemp_range above 0 by
    its dynamic one (_dynamic_temperature)."""
    temps = to_device([st.params.temperature for st in states], logits.device, logits.dtype)
    if any(st.params.dynatemp_range > 0 for st in states):  # decided on the host: no device sync for the common case
        return _dynamic_temperature(logits, states, temps)
    return logits / temps[:, None]


def _dynamic_temperature(logits: torch.Tensor, states: list, temps: torch.Tensor) -> torch.Tensor:
    """llama.cpp's temp_ext (src/llama-sampling.cpp llama_sampler_temp_ext_apply): a row with dynatemp_range d > 0
    and temperature t is divided by low + (t + d - low) * (entropy / log(candidates)) ^ dynatemp_exponent, low =
    max(0, t - d), over the tokens the filters before it left; a row of one candidate is left as it is, and a
    temperature of 0 keeps the most likely token alone, as its temp sampler does."""
    dev, dtype = logits.device, logits.dtype
    ranges = to_device([max(st.params.dynatemp_range, 0.0) for st in states], dev, dtype)
    exponents = to_device([st.params.dynatemp_exponent for st in states], dev, dtype)
    finite = logits > MASK
    size = finite.sum(dim=-1)
    logprobs = logits.log_softmax(dim=-1)
    entropy = -torch.where(finite, logprobs.exp() * logprobs, torch.zeros_like(logits)).sum(dim=-1)
    normalized = entropy / size.clamp(min=2).to(dtype).log()
    low = (temps - ranges).clamp(min=0)
    dynamic = low + (temps + ranges - low) * normalized.clamp(min=0) ** exponents
    dynamic = torch.where((ranges > 0) & (size > 1), dynamic, temps)
    kept = torch.where((ranges > 0) & (size <= 1), torch.ones_like(temps), dynamic)
    # A dynamic temperature of 0 (a zero temperature row's low entropy): its argmax alone, as llama.cpp's temp 0.
    zero = kept <= 0
    best = logits.masked_fill(logits < logits.max(dim=-1, keepdim=True).values, MASK)
    return torch.where(zero[:, None], best, logits / kept.clamp(min=1e-6)[:, None])


def _min_keep(states: list, device) -> torch.Tensor:
    """[R, 1] int64: llama.cpp's min_keep of each row, at least 1."""
    return to_device([max(st.params.min_keep, 1) for st in states], device, torch.int64)[:, None]


def min_p(logits: torch.Tensor, states: list) -> torch.Tensor:
    """Masks tokens whose probability is below min_p times the most likely token's (vLLM's MinPLogitsProcessor,
    llama.cpp's min_p sampler: the same set, logit >= max logit + log(min_p)), keeping at least min_keep tokens as
    llama.cpp does; rows with min_p 0 are untouched."""
    values = [st.params.min_p for st in states]
    if not any(v > 0 for v in values):  # decided on the host: no device sync for the common case
        return logits
    probs = logits.softmax(dim=-1)
    threshold = to_device(values, logits.device, logits.dtype)[:, None] * probs.max(dim=-1, keepdim=True).values
    most_kept = max(st.params.min_keep for st in states)
    if most_kept > 1:
        # The min_keep-th most likely token's probability, when it is below the threshold, is the threshold.
        top = probs.topk(min(most_kept, probs.shape[1]), dim=-1).values
        kth = top.gather(1, (_min_keep(states, logits.device) - 1).clamp(max=top.shape[1] - 1))
        threshold = torch.minimum(threshold, kth)
    return logits.masked_fill(probs < threshold, MASK)


def top_k_top_p(logits: torch.Tensor, states: list, use_k: bool = True, use_p: bool = True,
                keep_ties: bool = False, strict_p: bool = False) -> torch.Tensor:
    """top_k, then top_p over the mass the top_k tokens renormalised to (vLLM's apply_top_k_top_p); either alone
    with use_k / use_p False. A token stays while the mass before it is at most top_p (Ollama's topP: it stops where
    the running sum passes top_p), or with strict_p below top_p (vLLM's ascending sum <= 1 - top_p masked, llama.cpp's
    stop where the running sum reaches top_p); the best min_keep tokens, at least one, always stay. top_k keeps k
    tokens (llama.cpp's partial sort, Ollama's heap), or with keep_ties every token not below the k-th largest logit
    (vLLM's threshold: ties with the k-th stay)."""
    dev, vocab = logits.device, logits.shape[1]
    k_values = [st.params.top_k if use_k and 0 < st.params.top_k < vocab else vocab for st in states]
    p_values = [st.params.top_p if use_p and 0 < st.params.top_p < 1 else 1.0 for st in states]
    # which filters apply is decided from the host's lists, so the logits' device is not synchronised for it
    if all(k >= vocab for k in k_values) and all(v >= 1 for v in p_values):
        return logits
    top_k = to_device(k_values, dev, torch.int64)
    top_p = to_device(p_values, dev, logits.dtype)
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    ranks = torch.arange(vocab, device=dev)[None, :]
    if keep_ties:
        kth = sorted_logits.gather(1, (top_k[:, None] - 1).clamp(max=vocab - 1))
        sorted_logits = sorted_logits.masked_fill(sorted_logits < kth, MASK)
    else:
        sorted_logits = sorted_logits.masked_fill(ranks >= top_k[:, None], MASK)
    probs = sorted_logits.softmax(dim=-1)
    # Only rows with a top_p: float32 sums over the vocabulary pass 1.0, which would cut the tail of a top_p = 1 row
    # batched with one that has a top_p, so that a seeded request's distribution depended on its neighbours.
    mass_before = probs.cumsum(dim=-1) - probs
    # llama.cpp's min_keep: the first min_keep tokens always stay.
    past = mass_before >= top_p[:, None] if strict_p else mass_before > top_p[:, None]
    cut = past & (top_p[:, None] < 1) & (ranks >= _min_keep(states, dev))
    sorted_logits = sorted_logits.masked_fill(cut, MASK)
    return torch.full_like(logits, MASK).scatter(1, order, sorted_logits)


def vllm_top_k_top_p(logits: torch.Tensor, states: list) -> torch.Tensor:
    """top_k_top_p as vLLM's: the tokens tied with the k-th stay (vllm/v1/sample/ops/topk_topp_sampler.py)."""
    return top_k_top_p(logits, states, keep_ties=True, strict_p=True)


def llama_cpp_top_k_top_p(logits: torch.Tensor, states: list) -> torch.Tensor:
    """top_k_top_p as llama.cpp's top_k then top_p: k tokens, the token where the running sum reaches top_p the
    last (llama_sampler_top_p_apply)."""
    return top_k_top_p(logits, states, strict_p=True)


def top_k(logits: torch.Tensor, states: list) -> torch.Tensor:
    """top_k_top_p with top_k alone: logits [M, V] with every token below a row's top_k masked to -inf."""
    return top_k_top_p(logits, states, use_p=False)


def top_p(logits: torch.Tensor, states: list) -> torch.Tensor:
    """top_k_top_p with top_p alone, llama.cpp's (strict_p): logits [M, V] with the tokens past a row's top_p mass
    masked to -inf."""
    return top_k_top_p(logits, states, use_k=False, strict_p=True)


def typical(logits: torch.Tensor, states: list) -> torch.Tensor:
    """Locally typical sampling (llama.cpp's typical_p): tokens ordered by how far their surprise (-log p) is from the
    row's entropy are kept while the mass before them is at most typical_p (the closest min_keep tokens, at least one,
    always stay); rows with typical_p 1 (or 0, unset) are untouched."""
    values = [st.params.typical_p if 0 < st.params.typical_p < 1 else 1.0 for st in states]
    if all(v >= 1 for v in values):  # decided on the host: no device sync for the common case
        return logits
    mass = to_device(values, logits.device, logits.dtype)
    logprobs = logits.log_softmax(dim=-1)
    probs = logprobs.exp()
    # Masked tokens (p = 0) add nothing to the entropy (0 * -inf would be NaN) and sort last (distance inf).
    entropy = -torch.where(probs > 0, probs * logprobs, torch.zeros_like(probs)).sum(dim=-1, keepdim=True)
    order = (-logprobs - entropy).abs().argsort(dim=-1)
    sorted_probs = probs.gather(1, order)
    positions = torch.arange(logits.shape[1], device=logits.device)[None, :]
    cut_sorted = (((sorted_probs.cumsum(dim=-1) - sorted_probs) > mass[:, None]) & (mass[:, None] < 1)
                  & (positions >= _min_keep(states, logits.device)))
    cut = torch.zeros_like(cut_sorted).scatter(1, order, cut_sorted)
    return logits.masked_fill(cut, MASK)


_UNSEEDED = random.Random()   # XTC's draws for rows without a seed


def _xtc_fires(st) -> bool:
    """Whether XTC removes top tokens from this row at this step: on (probability above 0, threshold at most 0.5, as
    llama.cpp's llama_sampler_xtc_apply returns at once otherwise) and its uniform draw at most the probability. A
    seeded row draws from (seed, the step's output index) only, so its tokens do not depend on its neighbours."""
    p = st.params
    if p.xtc_probability <= 0 or p.xtc_threshold > 0.5:
        return False
    rng = random.Random((p.seed << 32) + len(st.output_token_ids)) if p.has_seed else _UNSEEDED
    return rng.random() <= p.xtc_probability


def xtc(logits: torch.Tensor, states: list) -> torch.Tensor:
    """llama.cpp's XTC (exclude top choices): in a row whose draw fires, the tokens whose probability (among those the
    filters before it left) is at least xtc_threshold are removed but the least likely of them, when two or more are
    and at least min_keep tokens stay; other rows are untouched."""
    fires = [_xtc_fires(st) for st in states]
    if not any(fires):  # decided on the host: no device sync for the common case
        return logits
    dev = logits.device
    thresholds = to_device([st.params.xtc_threshold if on else 2.0 for st, on in zip(states, fires)], dev,
                           logits.dtype)[:, None]
    sorted_probs, order = logits.softmax(dim=-1).sort(dim=-1, descending=True)
    last_above = (sorted_probs >= thresholds).sum(dim=-1, keepdim=True) - 1   # llama.cpp's pos_last (-1: none)
    size = (logits > MASK).sum(dim=-1, keepdim=True)
    min_keep = to_device([st.params.min_keep for st in states], dev, torch.int64)[:, None]
    ranks = torch.arange(logits.shape[1], device=dev)[None, :]
    cut_sorted = (ranks < last_above) & (size - last_above >= min_keep)
    return logits.masked_fill(torch.zeros_like(cut_sorted).scatter(1, order, cut_sorted), MASK)


def top_n_sigma(logits: torch.Tensor, states: list) -> torch.Tensor:
    """llama.cpp's top-n-sigma: in a row with top_n_sigma n > 0, the tokens whose logit is below the row's best minus
    n standard deviations of its finite logits are masked (the temperature scales both alike, so where it runs does
    not change the set); other rows are untouched."""
    values = [st.params.top_n_sigma for st in states]
    if not any(v > 0 for v in values):  # decided on the host: no device sync for the common case
        return logits
    finite = logits > MASK
    count = finite.sum(dim=-1, keepdim=True).clamp(min=1)
    zeroed = torch.where(finite, logits, torch.zeros_like(logits))
    mean = zeroed.sum(dim=-1, keepdim=True) / count
    std = (torch.where(finite, (logits - mean) ** 2, torch.zeros_like(logits)).sum(dim=-1, keepdim=True) / count).sqrt()
    n = to_device([v if v > 0 else float("inf") for v in values], logits.device, logits.dtype)[:, None]
    best = logits.max(dim=-1, keepdim=True).values
    return logits.masked_fill((logits < best - n * std) & (n < float("inf")), MASK)


# XTC runs where llama.cpp's chain has it, after min_p and before the temperature, and top-n-sigma before top_k; the
# other chains, which lack them (a /v1 request may name llama.cpp's fields), run XTC after their filters and top-n-sigma
# before them.
CHAINS = {
    pb.SamplingParams.CHAIN_VLLM: (temperature, top_n_sigma, min_p, vllm_top_k_top_p, typical, xtc),
    pb.SamplingParams.CHAIN_OLLAMA: (temperature, top_n_sigma, top_k_top_p, typical, min_p, xtc),
    pb.SamplingParams.CHAIN_LLAMA_CPP: (top_n_sigma, top_k, typical, top_p, min_p, xtc, temperature),
}


# llama.cpp's `samplers` (a request's own order, pb.SamplingParams.filter_order); FILTER_NONE is no step.
FILTERS = {
    pb.SamplingParams.FILTER_TEMPERATURE: temperature, pb.SamplingParams.FILTER_TOP_K: top_k,
    pb.SamplingParams.FILTER_TOP_P: top_p, pb.SamplingParams.FILTER_MIN_P: min_p,
    pb.SamplingParams.FILTER_TYPICAL_P: typical, pb.SamplingParams.FILTER_XTC: xtc,
    pb.SamplingParams.FILTER_TOP_N_SIGMA: top_n_sigma,
}


# llama.cpp's chain without typical_p: top_k then top_p is what top_k_top_p does in one sort (top_p over the mass the
# top_k tokens renormalised to), where the two steps would sort the vocabulary twice.
_LLAMA_CPP_PLAIN = (top_n_sigma, llama_cpp_top_k_top_p, min_p, xtc, temperature)
_MIROSTAT = (temperature, mirostat)


def _steps(params) -> tuple:
    """The filters a row runs, in order: mirostat's after the temperature when it is on (it replaces llama.cpp's
    samplers), else its own filter_order when it has one, else its chain's."""
    if mirostat_on(params):
        return _MIROSTAT
    if params.filter_order:
        return tuple(FILTERS[f] for f in params.filter_order if f in FILTERS)
    if params.chain == pb.SamplingParams.CHAIN_LLAMA_CPP and not 0 < params.typical_p < 1:
        return _LLAMA_CPP_PLAIN
    return CHAINS.get(params.chain, CHAINS[pb.SamplingParams.CHAIN_VLLM])


def _run(steps: tuple, logits: torch.Tensor, states: list) -> torch.Tensor:
    for step in steps:
        logits = step(logits, states)
    return logits


def filter_probs(logits: torch.Tensor, states: list) -> torch.Tensor:
    """Each row's filters on logits [R, V] of sampled rows (penalties and logit_bias already applied), rows that run
    the same ones together; returns the probabilities [R, V] to draw from (0 for every filtered token)."""
    steps = [_steps(st.params) for st in states]
    if len(set(steps)) == 1:
        return _run(steps[0], logits, states).softmax(dim=-1)
    out = torch.empty_like(logits)
    for group in set(steps):
        picked = [r for r, s in enumerate(steps) if s == group]
        rows = to_device(picked, logits.device, torch.int64)
        out[rows] = _run(group, logits[rows], [states[r] for r in picked])
    return out.softmax(dim=-1)
