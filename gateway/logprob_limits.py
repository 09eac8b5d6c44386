"""Gateway process: the bounds of /v1's logprob counts (chat top_logprobs, completions logprobs, prompt_logprobs),
checked as vLLM checks them and refused in its words.

vLLM reads them in two steps: its request models (check_logprobs in vllm/entrypoints/openai/*/protocol.py) refuse a
negative count other than -1, where -1 asks for the whole vocabulary, then its engine (_validate_logprobs) counts -1
as the vocabulary's size and refuses a count above --max-logprobs (20 by default, the most the scheduler returns
here): "Requested sample logprobs of 1024, which is greater than max allowed: 20". Clients read that cap from the
message (axolotl's online distillation docs quote it; capability probes send a large count and parse "max allowed").
"""
from __future__ import annotations

from typing import Optional

from gateway.errors import InvalidRequest

# Alternatives per position the scheduler returns; vLLM's --max-logprobs default.
MAX_LOGPROBS = 20


def check_logprob_counts(body: dict, vocab_size: int, chat: bool) -> None:
    """400 for a logprob count vLLM refuses, in its words (after the schema typed them as integers). The sample
    count is chat's top_logprobs (vLLM's logprobs once logprobs is true) or completions' logprobs; each error names
    the field the client sent."""
    prompt = body.get("prompt_logprobs")
    if prompt is not None and prompt < -1:
        raise InvalidRequest("`prompt_logprobs` must be a positive value or -1.", param="prompt_logprobs")
    sample, param = _sample_count(body, chat)
    _check_max("sample", sample, vocab_size, param)
    _check_max("prompt", prompt, vocab_size, "prompt_logprobs")


def _sample_count(body: dict, chat: bool) -> tuple[Optional[int], str]:
    """(the sample logprob count asked for, the field that asked); vLLM's request-model checks on the way."""
    if not chat:
        count = body.get("logprobs")
        if count is not None and count < 0:
            raise InvalidRequest("`logprobs` must be a positive value.", param="logprobs")
        return count, "logprobs"
    top = body.get("top_logprobs")
    if top is not None and top < -1:
        raise InvalidRequest("`top_logprobs` must be a positive value or -1.", param="top_logprobs")
    if top is not None and top != 0 and not body.get("logprobs"):
        raise InvalidRequest("when using `top_logprobs`, `logprobs` must be set to true.", param="top_logprobs")
    return (top if body.get("logprobs") else None), "top_logprobs"


def _check_max(kind: str, count: Optional[int], vocab_size: int, param: str) -> None:
    requested = vocab_size if count == -1 else count
    if requested is not None and requested > MAX_LOGPROBS:
        raise InvalidRequest(f"Requested {kind} logprobs of {requested}, which is greater than max allowed: "
                             f"{MAX_LOGPROBS}", param=param)
