"""Worker process: llama.cpp's DRY sampler ("don't repeat yourself", src/llama-sampling.cpp llama_sampler_dry_apply,
ported there from KoboldCpp): a token that would extend a sequence already in the context gets its logit lowered by
dry_multiplier * dry_base ^ (the sequence's length - dry_allowed_length), the lengths counted back from the end of the
prompt+output tokens (the last dry_penalty_last_n of them, -1 all) and cut at the latest sequence breaker. It runs on
the host over each DRY row's tokens (the Z-algorithm, linear in them), after the repetition penalties, as llama.cpp's
chain runs it (penalties, dry, then the filters)."""
import math

import torch

from worker.batch import to_device

_FLOAT_MAX_LOG = 88.7228391


def dry_on(params) -> bool:
    """llama.cpp's test: a multiplier, a base of at least 1 and a window (0 is off, -1 the whole context)."""
    return params.dry_multiplier != 0 and params.dry_base >= 1 and params.dry_penalty_last_n != 0


def breakers(params) -> dict:
    """{head token: [tails]} of the row's processed sequence breakers (each pb.TokenIds is its head and tail, as the
    gateway found them in the vocabulary: llama.cpp's get_overlapping_token_sequences)."""
    out: dict = {}
    for seq in params.dry_sequence_breakers:
        if seq.ids:
            out.setdefault(seq.ids[0], []).append(list(seq.ids[1:]))
    return out


def _rep_limit(rat, n: int, heads: dict) -> int:
    """Step 1: the longest repetition may not reach back past the latest restart sequence."""
    for i in range(n):
        tails = heads.get(rat(i))
        if tails is None:
            continue
        longest = -1
        for tail in tails:
            size = len(tail)
            if longest < size <= i and all(tail[o] == rat(i - o - 1) for o in range(size)):
                longest = size
        if longest >= 0:
            return i - longest
    return n


def _repeat_counts(rev: list, n: int, limit: int) -> list:
    """Step 2: counts[last - k] = how many tokens before position last - k match the context's end (the reversed
    Z-algorithm), each at most `limit`; llama.cpp compares its capped values as they are, as here."""
    counts, last, lt, rt = [0] * n, n - 1, 0, 0
    for k in range(1, n):
        if k > rt:
            m = 0
            while m + k < n and rev[m] == rev[m + k]:
                m += 1
            counts[last - k] = min(m, limit)
            if m > 0:
                lt, rt = k, k + m - 1
        elif counts[last - (k - lt)] < rt - k + 1:
            counts[last - k] = min(counts[last - (k - lt)], limit)
        else:
            i = rt + 1
            while i < n and rev[i] == rev[i - k]:
                i += 1
            counts[last - k] = min(i - k, limit)
            lt, rt = k, i - 1
    return counts


def dry_penalties(history: list, params, heads: dict) -> dict:
    """{token id: the logit penalty} for one row, its prompt+output tokens `history`: empty when no sequence is
    long enough. A token that is a single-token sequence breaker is never penalised."""
    allowed = params.dry_allowed_length
    window = len(history) if params.dry_penalty_last_n < 0 else params.dry_penalty_last_n
    n = min(len(history), window)
    if n <= allowed:
        return {}
    rev = history[-n:][::-1]   # rev[i] is llama.cpp's last_tokens.rat(i)
    limit = _rep_limit(rev.__getitem__, n, heads)
    if limit < allowed:
        return {}
    counts = _repeat_counts(rev, n, limit)
    longest: dict = {}
    for i in range(n - 1):
        if counts[i] >= allowed:
            token = rev[n - 2 - i]
            longest[token] = max(longest.get(token, -1), counts[i])
    base = params.dry_base
    max_exponent = int(_FLOAT_MAX_LOG / math.log(base)) if base > 1.000001 else 0
    out = {}
    for token, length in longest.items():
        if any(not tail for tail in heads.get(token, ())):
            continue
        exponent = length - allowed
        if max_exponent > 0:
            exponent = min(exponent, max_exponent)
        out[token] = params.dry_multiplier * base ** exponent
    return out


def apply_dry(logits: torch.Tensor, states: list) -> None:
    """In place on logits [M, V]: each DRY row's penalties subtracted (rows without DRY untouched)."""
    vocab = logits.shape[1]
    for r, st in enumerate(states):
        if not dry_on(st.params):
            continue
        if st.dry_breakers is None:
            st.dry_breakers = breakers(st.params)
        penalties = dry_penalties(st.prompt_token_ids + st.output_token_ids, st.params, st.dry_breakers)
        ids = [token for token in penalties if token < vocab]
        if ids:
            logits[r, to_device(ids, logits.device, torch.int64)] -= to_device(
                [penalties[t] for t in ids], logits.device, logits.dtype)
