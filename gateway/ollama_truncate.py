"""Gateway process: Ollama's chat-history truncation (/api/chat `truncate: true`): the oldest messages left out."""
from __future__ import annotations

from bisect import bisect_left
from typing import Callable


def fit_history(messages: list, fits: Callable[[list], bool], max_messages: int) -> list:
    """The messages Ollama's chatPrompt keeps when the rendered conversation does not fit the window
    (server/prompt.go): the system message and the newest messages that fit, the last one always (alone it may still
    not fit: the caller's 400 then), the rest left out from the oldest. At most max_messages after the system
    message are tried, as each renders to a token at least."""
    if fits(messages):
        return messages
    system = messages[:1] if messages and messages[0]["role"] == "system" else []
    rest = messages[len(system):][-max_messages:]
    # Fewer messages render to fewer tokens, so the oldest start that fits is found by bisection (Ollama tries each
    # start in turn: the same start, in log2(n) renders instead of n).
    start = bisect_left(range(len(rest) - 1), True, key=lambda i: fits(system + rest[i:]))
    return system + rest[start:]
