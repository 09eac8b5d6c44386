"""Gateway process: KoboldCpp's instruct placeholders ({{[SYSTEM]}}, {{[INPUT]}}, {{[OUTPUT]}} and their _END forms),
which KoboldAI Lite's default instruct tags send and KoboldCpp replaces with the served model's chat-template tags
unless replace_instruct_placeholders is false (koboldcpp.py transform_genparams, "universal template replace").

The tags are the served chat template's own, found by rendering a conversation of markers (the turn openers and
closers around each message), as KoboldCpp's AutoGuess adapter gives them for a known template. The generation prompt
is the template's with thinking off (`<think>\\n\\n</think>\\n\\n` for the shipped model), so a text completion holds the
answer, as KoboldCpp's text API returns plain text.
"""
from __future__ import annotations

from gateway.control_tokens import unmark
from gateway.openai_routes import rendered_messages

_MARK = "\ue000{}\ue000"
# KoboldCpp's tags without a chat-completions adapter (transform_genparams' defaults).
_FALLBACK = {"system_start": "\n### Instruction:\n", "system_end": "", "user_start": "\n### Instruction:\n",
             "user_end": "", "assistant_start": "\n### Response:\n", "assistant_end": "",
             "assistant_gen": "\n### Response:\n"}


def _render(card, roles: str) -> str:
    """The chat template's text of one marker message per role (s, u, a), with its generation prompt."""
    names = {"s": "system", "u": "user", "a": "assistant"}
    messages = [{"role": names[r], "content": _MARK.format(i)} for i, r in enumerate(roles)]
    body = {"messages": messages, "chat_template_kwargs": {"enable_thinking": False}}
    return unmark(rendered_messages(body, card))


def _between(text: str, first: int, second) -> str:
    start = text.index(_MARK.format(first)) + len(_MARK.format(first))
    return text[start:] if second is None else text[start:text.index(_MARK.format(second))]


def template_tags(card) -> dict:
    """KoboldCpp's adapter fields (system/user/assistant start and end, assistant_gen) of the served chat template;
    its defaults (### Instruction / ### Response) where the template does not render the markers apart."""
    try:
        turns, system = _render(card, "uau"), _render(card, "su")
        user_start = turns[:turns.index(_MARK.format(0))]
        user_to_assistant, assistant_to_user = _between(turns, 0, 1), _between(turns, 1, 2)
        system_to_user, after_last = _between(system, 0, 1), _between(turns, 2, None)
    except Exception:  # noqa: BLE001 - a template that refuses or drops these turns: KoboldCpp's adapter-less tags
        return dict(_FALLBACK)
    if not user_start or not assistant_to_user.endswith(user_start):
        return dict(_FALLBACK)
    assistant_end = assistant_to_user[:-len(user_start)]
    # The closer after a user message is the one after an assistant's where the template writes them alike (ChatML).
    user_end = assistant_end if user_to_assistant.startswith(assistant_end) else ""
    return {"system_start": system[:system.index(_MARK.format(0))],
            "system_end": system_to_user[:-len(user_start)] if system_to_user.endswith(user_start) else "",
            "user_start": user_start, "user_end": user_end,
            "assistant_start": user_to_assistant[len(user_end):], "assistant_end": assistant_end,
            "assistant_gen": after_last[len(user_end):] if after_last.startswith(user_end) else after_last}


def _replace_last(text: str, old: str, new: str) -> str:
    head, found, tail = text.rpartition(old)
    return head + new + tail if found else text


def replace_placeholders(prompt: str, memory: str, stops: list, tags: dict) -> tuple[str, str, list]:
    """(prompt, memory, stop sequences) with KoboldCpp's placeholders replaced by `tags`, as transform_genparams
    replaces them: with an _END placeholder each tag stands alone; otherwise {{[INPUT]}} also closes the assistant
    turn before it (the first one only opens), {{[OUTPUT]}} closes the user turn, and the last {{[OUTPUT]}} is the
    generation prompt. A stop sequence that is a placeholder is its tag, stripped."""
    if tags["assistant_gen"] != tags["assistant_start"]:
        if "{{[OUTPUT]}}" in prompt:
            prompt = _replace_last(prompt, "{{[OUTPUT]}}", tags["assistant_gen"])
        elif "{{[OUTPUT]}}" in memory:
            memory = _replace_last(memory, "{{[OUTPUT]}}", tags["assistant_gen"])
    ends = "{{[INPUT_END]}}" in prompt or "{{[OUTPUT_END]}}" in prompt
    if not ends:
        if "{{[INPUT]}}" in memory:
            memory = memory.replace("{{[INPUT]}}", tags["user_start"], 1)
        else:
            prompt = prompt.replace("{{[INPUT]}}", tags["user_start"], 1)
    table = {"{{[INPUT]}}": tags["user_start"] if ends else tags["assistant_end"] + tags["user_start"],
             "{{[OUTPUT]}}": tags["assistant_start"] if ends else tags["user_end"] + tags["assistant_start"],
             "{{[SYSTEM]}}": tags["system_start"],
             "{{[INPUT_END]}}": tags["user_end"] if ends else "",
             "{{[OUTPUT_END]}}": tags["assistant_end"] if ends else "",
             "{{[SYSTEM_END]}}": tags["system_end"] if ends else ""}
    for old, new in table.items():
        prompt, memory = prompt.replace(old, new), memory.replace(old, new)
    stop_tags = {"{{[INPUT]}}": tags["user_start"], "{{[OUTPUT]}}": tags["assistant_start"],
                 "{{[INPUT_END]}}": tags["user_end"], "{{[OUTPUT_END]}}": tags["assistant_end"]}
    stops = [stop_tags[s].strip() if s in stop_tags else s for s in stops]
    return prompt, memory, [s for s in stops if s]
