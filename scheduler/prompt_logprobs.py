"""Scheduler process: gathers a request's prompt logprobs from the worker's per-chunk StepResult entries and hands
them, whole, to the request's first GenerateResponse (vLLM prompt_logprobs; the worker computes them)."""
from proto import pb


def merge_prompt_logprobs(req, entry) -> None:
    """Appends pb.PromptLogprobs `entry` (one chunk's positions) to req.prompt_logprobs. Positions restart at 1 when
    the prompt is computed again (preempted before its first token); entries after the first response (a re-prefill
    after a later preemption) or out of order are dropped. `req` None (finished meanwhile) is ignored."""
    if req is None or req.prompt_logprobs_sent:
        return
    if entry.first_position == 1 or req.prompt_logprobs is None:
        req.prompt_logprobs = pb.PromptLogprobs(first_position=1)
    acc = req.prompt_logprobs
    if entry.first_position != acc.first_position + len(acc.token_ids):
        return
    acc.token_ids.extend(entry.token_ids)
    acc.logprobs.extend(entry.logprobs)
    acc.ranks.extend(entry.ranks)
    acc.top_logprobs.extend(entry.top_logprobs)


def take_prompt_logprobs(req):
    """The pb.PromptLogprobs for req's first response (None when not asked for or already sent); marks it sent.
    A one-token prompt has no scored position: an empty message, so the response still says it was asked."""
    if not req.sampling.prompt_logprobs or req.prompt_logprobs_sent:
        return None
    req.prompt_logprobs_sent = True
    return req.prompt_logprobs or pb.PromptLogprobs(first_position=1)
