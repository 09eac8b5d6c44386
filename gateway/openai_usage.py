"""Gateway process: OpenAI's usage object (chat and legacy completions), with its reasoning tokens."""
from __future__ import annotations

from typing import Iterable, Optional

from gateway.engine import Usage


def usage_dict(usage: Usage, reasoning_tokens: Optional[int] = None) -> dict:
    """OpenAI's usage; with reasoning_tokens (a chat answer that splits the reasoning) its completion_tokens_details,
    as OpenAI, vLLM and LM Studio report how many of the completion tokens were thinking."""
    body = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens, "prompt_tokens_details": {"cached_tokens": usage.cached_tokens}}
    if reasoning_tokens is not None:
        body["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return body


def choice_usage(usage: Usage, prompt_index: int, num_tokens: int) -> Usage:
    """One choice's own counts, as vLLM's continuous_usage_stats report them on each chunk of that choice: its prompt's
    tokens and the tokens it generated so far (never the sum over the n choices or the prompts)."""
    prompt, cached = (usage.per_prompt[prompt_index] if prompt_index < len(usage.per_prompt)
                      else (usage.prompt_tokens, usage.cached_tokens))
    return Usage(prompt, num_tokens, cached)


def chat_usage(plan, usage: Usage, num_reasoning: Iterable[int]) -> dict:
    """A chat answer's usage: with completion_tokens_details.reasoning_tokens where it splits the reasoning, the sum
    of each choice's thinking ids (Delta.num_reasoning_tokens: counted also when the reasoning is left out of the
    answer, the tokens were generated)."""
    if not plan.gen.split_reasoning:
        return usage_dict(usage)
    return usage_dict(usage, min(sum(num_reasoning), usage.completion_tokens))
