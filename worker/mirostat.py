"""Worker process: llama.cpp's mirostat samplers (src/llama-sampling.cpp llama_sampler_mirostat_apply, v1, and
llama_sampler_mirostat_v2_apply, v2), which take the place of the filters after the temperature (common/sampling.cpp
common_sampler_init: temp, then mirostat). Each keeps a target surprise mu per sequence, 2 tau at first and after each
draw mu -= eta * (-log2 p(drawn) - tau), p in the distribution it drew from: v2 keeps the tokens whose surprise is at
most mu, v1 the k most likely, k from the Zipf exponent its 100 most likely tokens give. The draw a step made is read
back at the row's next step (its tokens are collected by then), so nothing waits for the device here."""
import math

import torch

from worker.batch import to_device

MASK = float("-inf")
_M = 100   # v1's m: the most likely tokens its Zipf estimate reads (llama.cpp's common_sampler_init passes 100)


def mirostat_on(params) -> bool:
    """Mirostat 1 or 2 (llama.cpp's `mirostat`); 0 is off."""
    return params.mirostat in (1, 2)


def _mu(st) -> float:
    """The row's mu: 2 tau at its first step, then updated from the probability of the token its last step drew."""
    if st.mirostat_mu is None:
        st.mirostat_mu = 2.0 * st.params.mirostat_tau
    if st.mirostat_drawn is not None:
        p = float(st.mirostat_drawn)
        st.mirostat_drawn = None
        surprise = -math.log2(p) if p > 0 else math.inf
        st.mirostat_mu -= st.params.mirostat_eta * (surprise - st.params.mirostat_tau)
    return st.mirostat_mu


def _v1_k(top: list, mu: float, n_vocab: int) -> int:
    """v1's k from the row's most likely probabilities (descending), as llama.cpp computes it (s_hat, the Zipf
    exponent estimate, then k = (eps * 2^mu / (1 - n^-eps)) ^ (1 / s_hat)); at least 1."""
    sum_tb = sum_tt = 0.0
    for i in range(min(_M - 1, len(top) - 1)):
        if top[i + 1] <= 0:
            break
        t = math.log((i + 2) / (i + 1))
        sum_tb += t * math.log(top[i] / top[i + 1])
        sum_tt += t * t
    if sum_tt == 0:
        return 1
    s_hat = sum_tb / sum_tt
    eps = s_hat - 1
    try:
        k = ((eps * 2.0 ** mu) / (1 - n_vocab ** -eps)) ** (1 / s_hat)
    except (OverflowError, ZeroDivisionError):
        return n_vocab
    return max(int(k), 1) if isinstance(k, float) and math.isfinite(k) else n_vocab


def mirostat(logits: torch.Tensor, states: list) -> torch.Tensor:
    """logits [R, V] (already tempered) with each row cut to what its mirostat keeps."""
    mus = [_mu(st) for st in states]
    sorted_probs, order = logits.softmax(dim=-1).sort(dim=-1, descending=True)
    # v2: the tokens whose surprise -log2 p is at most mu (p >= 2^-mu), at least the most likely one.
    floors = to_device([2.0 ** -mu for mu in mus], logits.device, logits.dtype)[:, None]
    counts = (sorted_probs >= floors).sum(dim=-1).clamp(min=1).tolist()
    v1 = [r for r, st in enumerate(states) if st.params.mirostat == 1]
    if v1:
        top = sorted_probs[:, :_M].tolist()
        for r in v1:
            counts[r] = _v1_k(top[r], mus[r], logits.shape[1])
    ranks = torch.arange(logits.shape[1], device=logits.device)[None, :]
    cut_sorted = ranks >= to_device(counts, logits.device, torch.int64)[:, None]
    return logits.masked_fill(torch.zeros_like(cut_sorted).scatter(1, order, cut_sorted), MASK)


def note_draws(probs: torch.Tensor, picked: torch.Tensor, states: list) -> None:
    """Keeps, for each mirostat row, the probability (on the device) of the token it drew, for its next step's mu."""
    rows = [r for r, st in enumerate(states) if mirostat_on(st.params)]
    if rows:
        index = to_device(rows, probs.device, torch.int64)
        drawn = probs[index, picked[index]]
        for i, r in enumerate(rows):
            states[r].mirostat_drawn = drawn[i]
