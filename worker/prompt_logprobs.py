"""Worker process: vLLM prompt logprobs of prefill chunks (SamplingParams.prompt_logprobs).

For a row whose request asks, the LM head runs over every position of its chunk, not only the last: position j's
log_softmax (f32, raw: no penalty, bias, grammar or temperature) scores the prompt token at j + 1. A chunk scores
its own tokens: its first token (context_len c0 > 0) with the previous chunk's last-position logprobs, which the
request's SamplingState keeps as `prompt_carry` [V], so nothing is lost at chunk boundaries. Prompt position 0 is
never scored (nothing before it). Letters as worker/batch.py; V = vocabulary (the sampler's vocab_size), D = hidden.
"""
from dataclasses import dataclass

import torch

from proto import pb

# Positions per LM-head pass: bounds the [SLICE, V] f32 temporaries (256 x 248K x 4 B = 254 MB at the 27B shape).
SLICE = 256


class PromptLogprobsError(Exception):
    """A chunk that continues a prompt whose earlier chunk's last logits were not kept (a scheduler bug)."""


@dataclass
class PromptRow:
    """One step row that scores prompt tokens: its tokens are batch tokens [start, start + num_tokens)."""
    req_id: str
    start: int          # index into the step's T dimension of the row's first token
    num_tokens: int     # tokens of the row in this step
    context_len: int    # tokens before the row (prompt position of its first token)


def prompt_rows(step, states: dict) -> list:
    """The rows of pb.PackedStep `step` whose request asked for prompt logprobs and whose chunk holds prompt tokens
    (a request resumed after preemption re-prefills prompt + output; positions past the prompt are not scored)."""
    rows, offset = [], 0
    for row in step.rows:
        st = states.get(row.req_id)
        if st is not None and st.params.prompt_logprobs and row.context_len < len(st.prompt_token_ids):
            rows.append(PromptRow(row.req_id, offset, row.num_tokens, row.context_len))
        offset += row.num_tokens
    return rows


def _score(logprobs: torch.Tensor, targets: torch.Tensor, k: int) -> tuple:
    """logprobs [m, V] f32, targets [m] int64 -> (logprob [m], rank [m] int64 (1 = most likely), top ids [m, k],
    top logprobs [m, k]); rank = the tokens at least as likely as the target, itself included, as vLLM ranks it
    (vllm/v1/sample/ops/logprobs.py batched_count_greater_than: (x >= values).sum(-1)), so a tie takes its last place."""
    lp = logprobs.gather(1, targets[:, None])[:, 0]
    rank = (logprobs >= lp[:, None]).sum(dim=-1)
    top_lp, top_ids = logprobs.topk(k, dim=-1) if k else (logprobs[:, :0], targets[:, None][:, :0])
    return lp, rank, top_ids, top_lp


def score_chunk(lm_head, hidden: torch.Tensor, tokens: torch.Tensor, context_len: int, st, vocab_size: int):
    """One row's chunk. hidden [n, D] final-norm hidden states, tokens [n] int64 its ids, `st` the request's
    SamplingState (its prompt_carry [V] f32 is read for context_len > 0 and replaced by this chunk's last-position
    logprobs while more prompt follows). Returns a pb.PromptLogprobs, or None when the chunk scores nothing."""
    n, num_prompt = tokens.numel(), len(st.prompt_token_ids)
    first, end = max(context_len, 1), min(context_len + n, num_prompt)
    keep_carry = context_len + n < num_prompt
    k = min(st.params.num_prompt_logprobs, vocab_size)
    parts = []
    if context_len > 0:
        if st.prompt_carry is None:
            raise PromptLogprobsError(f"{st.req_id}: chunk at {context_len} without the previous chunk's logits")
        parts.append(_score(st.prompt_carry[None], tokens[:1], k))
    # Local position j (0 <= j < num_scoring) scores local token j + 1; position n - 1 only feeds the carry.
    num_scoring = max(end - context_len - 1, 0)
    stop = n if keep_carry else num_scoring
    carry = None
    for j0 in range(0, stop, SLICE):
        j1 = min(j0 + SLICE, stop)
        logprobs = lm_head(hidden[j0:j1]).float()[:, :vocab_size].log_softmax(dim=-1)
        m = min(j1, num_scoring) - j0
        if m > 0:
            parts.append(_score(logprobs[:m], tokens[j0 + 1:j0 + 1 + m], k))
        if keep_carry and j1 == n:
            carry = logprobs[-1].clone()
    st.prompt_carry = carry
    if first >= end:
        return None
    return _to_pb(st, first, end, [torch.cat(t) for t in zip(*parts)], k)


def _to_pb(st, first: int, end: int, parts: list, k: int) -> "pb.PromptLogprobs":
    lp, rank, top_ids, top_lp = (t.cpu() for t in parts)
    out = pb.PromptLogprobs(req_id=st.req_id, first_position=first, token_ids=st.prompt_token_ids[first:end],
                            logprobs=lp.tolist(), ranks=rank.tolist())
    if k:
        for ids, values in zip(top_ids.tolist(), top_lp.tolist()):
            out.top_logprobs.add(token_ids=ids, logprobs=values)
    return out


def forward_with_prompt_logprobs(model, cache, batch, rows: list, states: dict, vocab_size: int) -> tuple:
    """The eager forward of a step with prompt-logprob rows: hidden states of every token once, the LM head on the
    sampled rows' last tokens (logits [M, V'] f32, as model.forward) and on every position of `rows`.
    Returns (logits, [pb.PromptLogprobs])."""
    hidden = model.forward(batch, cache, hidden=True)
    logits = model.lm_head(hidden[batch.last_token_index()]).float()
    scored = []
    for row in rows:
        span = slice(row.start, row.start + row.num_tokens)
        out = score_chunk(model.lm_head, hidden[span], batch.input_ids[span], row.context_len,
                          states[row.req_id], vocab_size)
        if out is not None:
            scored.append(out)
    return logits, scored
