"""Gateway process: prompt logprobs on /v1 (vLLM's `prompt_logprobs` field, /v1/completions `echo` + `logprobs`):
what a body asks for and how the scheduler's per-prompt-token logprobs are shaped in the response.

Prompt position 0 has nothing before it and is never scored: it is `null` in both shapes, as in vLLM and OpenAI.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from gateway.errors import InvalidRequest
from gateway.gen_request import ChoiceResult
from gateway.logprob_names import logprob_names
from gateway.model import ModelCard
from gateway.stream import TextOffsets


@dataclass
class PromptLogprobsPlan:
    """The prompt-logprob part of a validated /v1 request."""
    echo_top: Optional[int] = None   # completions echo + logprobs N: the legacy logprobs cover the prompt first
    vllm_top: Optional[int] = None   # prompt_logprobs K: vLLM's list (per choice on completions, top-level on chat)
    prompt_only: bool = False        # completions max_tokens 0 + echo: one token is generated and dropped (as vLLM)

    @property
    def num_prompt_logprobs(self) -> Optional[int]:
        """Alternatives per prompt position the scheduler must return (the larger ask); None: none asked."""
        asks = [k for k in (self.echo_top, self.vllm_top) if k is not None]
        return max(asks) if asks else None


def plan_prompt_logprobs(body: dict, echo: bool, stream: bool, chat: bool = False) -> PromptLogprobsPlan:
    """Reads prompt_logprobs (0..20, checked by logprob_limits) and, with echo, logprobs; 400 for prompt_logprobs on a
    stream, in vLLM's words (echo + logprobs streams: the first chunk of each choice carries the prompt part). As vLLM's
    check_logprobs, only a count that asks for alternatives is refused there: a stream's chunks carry no prompt
    logprobs, so prompt_logprobs 0 streams without them.

    `echo` without prompt_logprobs asks for them as vLLM's to_sampling_params does (chat: at top_logprobs, 0 unless
    sent; completions: at logprobs, when sent), and its non-streamed answer returns them as its prompt_logprobs (chat:
    beside the choices, completions: in each choice), which clients read for the prompt's ids and logprobs (vllm#27477
    reads them from a chat echo)."""
    vllm_top = body.get("prompt_logprobs")
    if vllm_top is not None and stream:
        if vllm_top != 0:
            raise InvalidRequest("`prompt_logprobs` are not available when `stream=True`.", param="prompt_logprobs")
        vllm_top = None
    echo_top = body.get("logprobs") if echo else None
    if vllm_top is None and not stream and body.get("echo"):
        vllm_top = (body.get("top_logprobs") or 0) if chat else echo_top
    return PromptLogprobsPlan(echo_top=echo_top, vllm_top=vllm_top)


def _logprob(card: ModelCard, token_id: int, logprob: float, rank: int) -> dict:
    return {"logprob": logprob, "rank": rank, "decoded_token": card.token_text(token_id)}


def vllm_prompt_logprobs(card: ModelCard, entries: list, k: int) -> list:
    """vLLM's prompt_logprobs: [None] then, per scored position (TokenLogprob with rank), a dict keyed by token id
    (a string in JSON) of {logprob, rank, decoded_token}: the prompt token first, then the k most likely."""
    out = [None]
    for entry in entries:
        position = {str(entry.token_id): _logprob(card, entry.token_id, entry.logprob, entry.rank)}
        for rank, (token_id, logprob) in enumerate(entry.top[:k], 1):
            position.setdefault(str(token_id), _logprob(card, token_id, logprob, rank))
        out.append(position)
    return out


def legacy_top(card: ModelCard, chosen: int, pairs: list) -> dict:
    """One position's legacy top_logprobs, {token name: logprob} in the order of `pairs` [(token_id, logprob)], one key
    per token id: two ids with the same name (SentencePiece's "▁true" and "true" both read "true") no longer collapse
    into one key. The chosen token keeps card.legacy_token (the name `tokens` gives it); another id whose name is
    taken gets its vocabulary entry, else vLLM's "token_id:N"."""
    names = {chosen: card.legacy_token(chosen)}
    taken = set(names.values())
    for token_id, _ in pairs:
        if token_id in names:
            continue
        name = card.legacy_token(token_id)
        if name in taken:
            name = card.token_pieces([token_id])[0]
        if name in taken:
            name = f"token_id:{token_id}"
        names[token_id] = name
        taken.add(name)
    top: dict = {}
    for token_id, logprob in pairs:
        # An id listed twice (the prompt token among the most likely) keeps its first place and value.
        top.setdefault(names[token_id], logprob)
    return top


def echo_legacy_logprobs(card: ModelCard, prompt_ids: list, entries: list, n: int, echo_text: str) -> dict:
    """The prompt part of completions logprobs (echo): tokens, token_logprobs and top_logprobs (null for the first
    token; else the prompt token and the n most likely), text_offset (characters) into echo_text, special tokens
    counted as the echoed text keeps them. A prompt cut by truncate_prompt_tokens is echoed whole (as vLLM does) and
    its kept tokens are the end of it: their offsets start where their text does (they started at 0)."""
    tops = [None]
    for entry in entries:
        tops.append(legacy_top(card, entry.token_id, [(entry.token_id, entry.logprob)] + list(entry.top[:n])))
    kept = card.decode(prompt_ids, False)
    start = len(echo_text) - len(kept) if echo_text.endswith(kept) else 0
    return {"tokens": [card.legacy_token(t) for t in prompt_ids],
            "token_logprobs": [None] + [e.logprob for e in entries], "top_logprobs": tops,
            "text_offset": TextOffsets(lambda token_id: card.text_bytes(token_id, False), start).push(prompt_ids)}


def join_legacy(first: dict, second: dict) -> dict:
    """Two legacy logprobs blocks (prompt part, generated part) as one."""
    return {key: first[key] + second[key] for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset")}


def prompt_only_result(result: ChoiceResult) -> ChoiceResult:
    """max_tokens 0 + echo: the generated token is dropped and the choice ends for length, as vLLM answers."""
    return replace(result, content="", reasoning="", logprobs=[], finish_reason="length", stop_reason=None,
                   token_ids=[])


def completion_choice_extras(plan, card: ModelCard, result: ChoiceResult, logprobs: Optional[dict],
                             choice: dict) -> None:
    """Fills `choice` (a completions choice) with the prompt parts plan.prompt asks for: the echo logprobs before
    the generated ones (`logprobs` is their legacy block), and vLLM's prompt_logprobs."""
    prompt = plan.prompt
    entries = result.prompt_logprobs or []
    if prompt.echo_top is not None and logprobs is not None:
        prompt_ids = plan.gen.all_prompt_ids[result.index // plan.gen.n]
        echo = plan.echo_texts[result.index // plan.gen.n]
        names = logprob_names(plan, card)
        choice["logprobs"] = join_legacy(echo_legacy_logprobs(names, prompt_ids, entries, prompt.echo_top, echo),
                                         logprobs)
    if prompt.vllm_top is not None:
        choice["prompt_logprobs"] = vllm_prompt_logprobs(card, entries, prompt.vllm_top)
