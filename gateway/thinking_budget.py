"""Gateway process: vLLM's thinking_token_budget, enforced by the grammar: at most N tokens of reasoning, then the
grammar allows only </think> (as vLLM forces its reasoning end token), and the answer after it is what it would be."""
from __future__ import annotations

import re
from typing import Optional

from gateway.model import ModelCard
from gateway.structured import THINK_BODY, checked, think_prefix

# The start rule of every grammar built with thinking open begins with the free reasoning (structured.think_prefix).
_START = re.compile(r"^start: " + re.escape(THINK_BODY) + " ", re.MULTILINE)


def apply_thinking_budget(body: dict, gen, card: ModelCard, calls: bool = False) -> None:
    """gen.constraint bounds the reasoning to body's thinking_token_budget (-1 or absent: unbounded). Only where the
    prompt opened the thinking and the grammar lets it reason: thinking off, or a forced tool call (its grammar is the
    calls alone, also after a final message continued inside its thinking), has no reasoning to bound. calls: the
    answer is free and its tool calls are read, so a <tool_call> may end the reasoning too, as the reasoning split
    reads a call the thinking runs into (Qwen3.5 writes one inside <think> at times): the grammar refused the token
    there, and a call spelled out in its characters had </think> forced into its arguments (vllm#44676)."""
    budget = reasoning_budget(body)
    if budget is None or budget == -1 or not gen.thinking_open:
        return
    call_start = calls and gen.constraint is None and card.is_added_token("<tool_call>")
    grammar = gen.constraint.grammar if gen.constraint is not None else _free_answer(card, call_start)
    grammar, found = _START.subn("start: reasoning ", grammar, count=1)
    if not found:
        return
    gen.constraint = checked(f"{grammar}reasoning[max_tokens={budget}]: {THINK_BODY}\n", card,
                             "thinking_token_budget")


def reasoning_budget(body: dict) -> Optional[int]:
    """The first budget the request sets: vLLM's thinking_token_budget, llama.cpp's reasoning_budget_tokens and its
    older thinking_budget_tokens (as llama.cpp reads them, the first wins and -1 is none set), OpenRouter's
    reasoning.max_tokens ("a specific token limit for reasoning, Anthropic-style")."""
    for budget in (body.get("thinking_token_budget"), body.get("reasoning_budget_tokens"),
                   body.get("thinking_budget_tokens"), (body.get("reasoning") or {}).get("max_tokens")):
        if budget is not None and budget != -1:
            return budget
    return None


def _free_answer(card: ModelCard, call_start: bool = False) -> str:
    """The reasoning, </think>, then any tokens but eos (added ones such as <tool_call> too) until eos; call_start:
    or the reasoning, then <tool_call> and any tokens (the call it opens is the answer)."""
    calls = "\n     | reasoning <tool_call> answer" if call_start else ""
    return f"start: {think_prefix(card)} answer{calls}\nanswer: {any_token_but(card, ())}*\n"


def any_token_but(card: ModelCard, excluded) -> str:
    """A Lark item for one token of the vocabulary other than the eos tokens and the `excluded` ids."""
    last = max(card.vocab_size, card.tokenizer_vocab_size) - 1
    ranges, start = [], 0
    for banned in sorted(set(card.eos_token_ids) | set(excluded)) + [last + 1]:
        if start <= banned - 1:
            ranges.append(f"{start}-{banned - 1}" if banned - 1 > start else f"{start}")
        start = banned + 1
    return f"<[{','.join(ranges)}]>"
