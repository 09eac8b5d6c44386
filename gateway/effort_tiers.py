"""Gateway process: the reasoning-effort tiers a chat template honours, and an API's own effort level (Ollama's
`think`, LM Studio's `reasoning`) as the nearest tier the template has."""
from __future__ import annotations

import functools

from gateway.chat import TemplateError, compile_template, render_chat
from gateway.model import ModelCard

TIERS = ("low", "medium", "high", "xhigh")
# For each level, the tiers tried in turn when the template lacks it: the nearest first, a higher one before a lower
# (Ollama's Qwen3.8 renderer sends "high" and "max" as xhigh, the template having no "high").
_NEAREST = {"low": ("low", "medium", "high", "xhigh"), "medium": ("medium", "high", "low", "xhigh"),
            "high": ("high", "xhigh", "medium", "low"), "xhigh": ("xhigh", "high", "medium", "low")}


@functools.lru_cache(maxsize=8)
def _tiers(source: str, special_tokens: tuple) -> tuple:
    """The tiers the template renders a thinking turn with (a template that checks reasoning_effort raises on the
    others, as Qwen3.8's 'Unexpected reasoning effort high. Supported types are xhigh (default), medium, and low.')."""
    template = compile_template(source)
    tiers = []
    for tier in TIERS:
        try:
            render_chat(template, [{"role": "user", "content": "x"}], enable_thinking=True, reasoning_effort=tier,
                        **dict(special_tokens))
        except TemplateError:
            continue
        tiers.append(tier)
    return tuple(tiers)


def template_tiers(card: ModelCard) -> tuple:
    """The effort tiers (of TIERS, in that order) the served chat template renders a thinking turn with."""
    if not card.chat_template_source:
        return ()
    return _tiers(card.chat_template_source, tuple(sorted(card.special_tokens.items())))


def nearest_tier(card: ModelCard, level: str) -> str:
    """`level` (one of TIERS) as the chat template's nearest tier; the level itself when the template has none of them
    (its own error then says what it takes)."""
    if not card.chat_template_source or level not in _NEAREST:
        return level
    tiers = template_tiers(card)
    return next((tier for tier in _NEAREST[level] if tier in tiers), level)
