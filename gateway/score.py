"""Gateway process: POST /v1/score, teacher-forced scoring (the released engine's route, ../shared/research/
seed-engine.md 2.5): the natural-log probability of each token of a given completion after a prompt.

The prompt and the completion go to the scheduler as one prompt whose positions are scored (the worker's prompt
logprobs, vLLM's `prompt_logprobs`: the log-softmax of the logits before each token, read at that token), and the
completion's positions are returned; so a token's number equals the logprob a generation that sampled it reports
(`logprobs` on /v1/chat/completions). Requests with prompt logprobs never read the prefix cache (scheduler.py), so
every position is computed. One token is generated after the completion and dropped (the scheduler runs a request
to at least one output token).

Request: exactly one of `messages` (rendered as /v1/chat/completions renders them, generation prompt included;
`tools`, `enable_thinking`, `chat_template_kwargs` as there) or `prompt` (raw text); `completion` (text) or
`completion_token_ids` (ids; these win when both are given); `top_logprobs` 0-20. Response: {id, object "score",
model, tokens, token_ids, bytes, logprobs, sum_logprob, top_logprobs (with top_logprobs > 0), usage}.
"""
from __future__ import annotations

import math
import secrets

from gateway.errors import ContextLengthExceeded, InternalError, InvalidRequest
from gateway.gen_request import GenRequest, Sampling
from gateway.model import ModelCard
from gateway.openai_schema import TOKENIZE_SCHEMA

_INT32_MAX = 2 ** 31 - 1
_RENDER_FIELDS = ("model", "messages", "prompt", "tools", "add_generation_prompt", "continue_final_message",
                  "chat_template", "enable_thinking", "chat_template_kwargs", "template_vars", "tool_choice",
                  "reasoning_effort", "reasoning")
SCORE_SCHEMA = {
    "type": "object",
    "properties": {
        **{key: TOKENIZE_SCHEMA["properties"][key] for key in _RENDER_FIELDS},
        "completion": {"type": "string"},
        "completion_token_ids": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": _INT32_MAX}},
        "top_logprobs": {"type": ["integer", "null"], "minimum": 0, "maximum": 20},
    },
}


def check_parts(body: dict) -> None:
    """400 unless the body names one prompt (messages or prompt) and a completion (text or ids)."""
    if ("messages" in body) == ("prompt" in body):
        raise InvalidRequest("give exactly one of 'messages' or 'prompt'", param="messages")
    if body.get("completion") is None and body.get("completion_token_ids") is None:
        raise InvalidRequest("give 'completion' (text) or 'completion_token_ids' (token ids) to score",
                             param="completion")


def completion_ids(body: dict, card: ModelCard) -> list:
    """The completion's token ids: completion_token_ids (each < the model's vocabulary) or the encoded completion;
    400 when there is none to score."""
    ids = body.get("completion_token_ids")
    param = "completion_token_ids" if ids is not None else "completion"
    if ids is None:
        ids = card.encode(body["completion"])
    elif any(token_id >= card.vocab_size for token_id in ids):
        raise InvalidRequest(f"completion_token_ids must be token ids in [0, {card.vocab_size})", param=param)
    if not ids:
        raise InvalidRequest("the completion encodes to no tokens: there is nothing to score", param=param)
    return list(ids)


def check_size(prompt_text: str, body: dict, card: ModelCard, prompt_param: str) -> None:
    """400 context_length_exceeded at once when the prompt and completion texts are too many bytes to fit the
    context (a lower bound on their tokens, no tokenizing: a 30 MB prompt took 30 s of a gateway thread to refuse)."""
    ctx = card.max_context_len
    num_prompt = card.min_prompt_tokens(prompt_text)
    ids = body.get("completion_token_ids")
    num_completion = len(ids) if ids is not None else card.min_prompt_tokens(body["completion"])
    if num_prompt + num_completion >= ctx:
        raise ContextLengthExceeded(
            f"this model's maximum context length is {ctx} tokens; the prompt (at least {num_prompt} tokens) and the "
            f"completion (at least {num_completion} tokens) must leave one position free",
            param=prompt_param if num_prompt >= num_completion else "completion"
        ).counts(ctx, num_prompt + num_completion, at_least=True)


def check_fits(num_prompt: int, num_completion: int, card: ModelCard, prompt_param: str) -> None:
    """400 for an empty prompt (its first completion token would have nothing before it) and for a prompt and
    completion that leave the context no position for the generated token the scoring runs to."""
    if num_prompt == 0:
        raise InvalidRequest("the prompt encodes to no tokens: the completion's first token needs one before it",
                             param=prompt_param)
    ctx = card.max_context_len
    if num_prompt + num_completion >= ctx:
        raise ContextLengthExceeded(
            f"this model's maximum context length is {ctx} tokens; the prompt ({num_prompt} tokens) and the "
            f"completion ({num_completion} tokens) must leave one position free", param="completion"
        ).counts(ctx, num_prompt + num_completion)


def score_request(prompt_ids: list, completion: list, top: int) -> GenRequest:
    """The generation that scores `completion` after `prompt_ids`: one prompt, every position scored with `top`
    alternatives, one greedy token generated (and dropped)."""
    return GenRequest(req_id=f"score-{secrets.token_hex(12)}", prompt_ids=list(prompt_ids) + list(completion),
                      max_tokens=1, sampling=Sampling(temperature=0.0), ignore_eos=True, num_prompt_logprobs=top)


def _token(card: ModelCard, token_id: int, logprob: float) -> dict:
    return {"token": card.token_text(token_id), "token_id": token_id, "logprob": logprob,
            "bytes": list(card.token_bytes(token_id))}


def score_response(card: ModelCard, model: str, num_prompt: int, completion: list, entries: list,
                   top: int) -> dict:
    """The /v1/score body from the prompt logprobs `entries` (TokenLogprob of prompt positions 1..); 500 when they do
    not cover the completion's positions (the scheduler answered for another prompt)."""
    scored = (entries or [])[num_prompt - 1:]
    if len(scored) != len(completion) or any(e.token_id != t for e, t in zip(scored, completion)):
        raise InternalError(f"the scheduler scored {len(scored)} completion positions for {len(completion)} tokens")
    logprobs = [entry.logprob for entry in scored]
    body = {"id": f"score-{secrets.token_hex(12)}", "object": "score", "model": model,
            "tokens": [card.token_text(t) for t in completion], "token_ids": completion,
            "bytes": [list(card.token_bytes(t)) for t in completion], "logprobs": logprobs,
            "sum_logprob": math.fsum(logprobs),
            "usage": {"prompt_tokens": num_prompt, "completion_tokens": len(completion),
                      "total_tokens": num_prompt + len(completion)}}
    if top:
        body["top_logprobs"] = [[_token(card, t, lp) for t, lp in entry.top[:top]] for entry in scored]
    return body
