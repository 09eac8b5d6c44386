"""Gateway process: what Ollama's capability checks refuse, and whether an answer's <think> block is `thinking`.

Ollama (server/routes.go ChatHandler, GenerateHandler; server/images.go CheckCapabilities): tools on a model without
the tools capability are a 400 "<model> does not support tools" (Ollama's full name, registry.ollama.ai/library/x:latest); think on (true or an effort) on one without the
thinking capability is a 400 "\"<model>\" does not support thinking"; think false is fine on any model. The
capabilities are the ones /api/show and /api/tags list (the chat template's).
"""
from __future__ import annotations

from typing import Any, Optional

from gateway import json_out
from gateway.errors import Unsupported
from gateway.model import ModelCard
from gateway.ollama_names import full_name
from gateway.ollama_options import thinking_kwargs


def check_capabilities(think: Any, tools: Optional[list], card: ModelCard, model: str, served_name: str) -> None:
    """400 in Ollama's words for thinking or tools asked of a model without them (in Ollama's order: thinking is
    checked before the model is scheduled, tools when it is), load requests (no messages, no prompt) too."""
    if think is not None and thinking_kwargs(think)["enable_thinking"] and not card.thinks:
        raise Unsupported(f"{json_out.dumps(model).decode()} does not support thinking", param="think")
    if tools and not card.takes_tools:
        raise Unsupported(f"{full_name(served_name)} does not support tools", param="tools")


def splits_thinking(think: Any, card: ModelCard) -> bool:
    """Whether the output's <think>...</think> becomes `thinking`: on a model that thinks, unless `think` turns it
    off. As Ollama: with think false its parsers start in the answer (routes.go builds the thinking parser only when
    think is on; model/parsers/qwen35.go Init: thinking disabled starts in CollectingContent), and on a model without
    the thinking capability think stays unset, so a <think> block the model writes stays in the content."""
    return card.thinks and thinking_kwargs(think)["enable_thinking"]


def think_values(think: Any, thinks: bool) -> dict:
    """.Think, .ThinkLevel and .IsThinkSet as Ollama's GenerateHandler sets them: on a model that thinks an unset
    `think` is true (it defaults req.Think before rendering), and api.ThinkValue.String() names true "medium"."""
    if think is None and thinks:
        think = True
    level = think if isinstance(think, str) else "medium" if think is True else ""
    return {"Think": think is True or isinstance(think, str), "ThinkLevel": level, "IsThinkSet": think is not None}
