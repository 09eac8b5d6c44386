"""Gateway process: Ollama's thinking text without the whitespace of the <think> markup around it."""
from __future__ import annotations


class ThinkingTrim:
    """Ollama's thinking as its Qwen3.5 parser gives it (model/parsers/qwen35.go): the whitespace that opens the
    thinking and the whitespace before `</think>` (or before a tool call that ends it) are the template's markup
    (`<think>\\n...\\n</think>`), not thinking. Trailing whitespace is held back while more thinking may follow
    and dropped once the thinking ends, so streamed pieces join to the non-streamed text. `trim_end` False: only
    the opening whitespace goes, as Ollama's generic parser (thinking/parser.go) reads a raw prompt's answer."""

    def __init__(self, trim_end: bool = True):
        self._trim_end = trim_end
        self._started = False
        self._held = ""

    def push(self, thinking: str, ended: bool) -> str:
        """The part of `thinking` to send now; `ended`: the answer (or a call, or the end of the output) began."""
        if not self._started:
            thinking = thinking.lstrip()
            self._started = bool(thinking)
        text = self._held + thinking
        body = text.rstrip() if self._trim_end else text
        self._held = "" if ended else text[len(body):]
        return body
