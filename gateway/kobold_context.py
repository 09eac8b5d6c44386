"""Gateway process: a KoboldAI generate's memory and prompt fitted into its context as KoboldCpp fits them, the
front of the prompt cut instead of a refusal (koboldcpp.py generate: max_context_length capped at the loaded context,
max_length at it less min(it - 4, 16); gpttype_adapter.cpp gpttype_generate: "truncate to front of the prompt if
its too long", the memory kept, itself cut to the context less max_length and 4 when it alone is too long).

KoboldAI clients send the whole story or chat and leave the cut to the server (the AI Horde worker passes the Horde's
prompt and max_context_length through; SillyTavern's and Lite's own trims count with another tokenizer): a prompt
past the context was a 400 here and the generation never ran."""
from __future__ import annotations

from gateway.model import ModelCard


def context_of(body: dict, card: ModelCard) -> int:
    """The request's max_context_length, capped at the served context (its default)."""
    wanted = body.get("max_context_length")
    if isinstance(wanted, int) and not isinstance(wanted, bool) and 0 < wanted < card.max_context_len:
        return wanted
    return card.max_context_len


def fit_context(out: dict, memory: str, prompt: str, body: dict, card: ModelCard) -> None:
    """Sets out["prompt"] (and out["n_predict"] where KoboldCpp caps it): the text memory + prompt when it fits the
    context with the output, else KoboldCpp's cut as token ids (memory, then the prompt's last tokens)."""
    out["prompt"] = memory + prompt
    context, length = context_of(body, card), out.get("n_predict")
    if not isinstance(length, int) or isinstance(length, bool) or length <= 0 or context <= 4:
        return
    length = min(length, context - min(context - 4, 16))
    out["n_predict"] = length
    memory_ids, prompt_ids = card.encode(memory) if memory else [], card.encode(prompt)
    if len(memory_ids) + len(prompt_ids) + length <= context:
        return
    if len(memory_ids) + length + 4 > context:
        memory_ids = memory_ids[len(memory_ids) - max(context - length - 4, 0):]
    room = context - length - len(memory_ids)
    out["prompt"] = memory_ids + (prompt_ids[len(prompt_ids) - room:] if room > 0 else [])
