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


def go_space(char: str) -> bool:
    """Go's unicode.IsSpace: Python's str.isspace less the four separators \\x1c-\\x1f, which only Python counts."""
    return char.isspace() and not "\x1c" <= char <= "\x1f"


class AnswerStart:
    """The blanks that open the answer after the thinking, which Ollama's parsers eat: the Qwen3.5 one trims the
    text after </think> of every leading unicode.IsSpace character and eats the chunks that follow while they are
    blank (model/parsers/parsers.go splitAtTag, model/parsers/qwen35.go eatLeadingWhitespaceAndTransitionTo), and
    the generic one of a raw prompt alike (thinking/parser.go, thinkingState_ThinkingDoneEatingWhitespace). An answer
    that did not follow thinking (think false, a prefilled assistant message) keeps them: those parsers start in the
    content."""

    def __init__(self, thinking_open: bool):
        self._after_thinking = thinking_open   # the prompt opened <think>: whatever the answer is follows it
        self._started = False

    def push(self, content: str, thinking: str) -> str:
        """The part of `content` to send; `thinking`: the thinking text that came with it (before it)."""
        self._after_thinking = self._after_thinking or bool(thinking)
        if self._started or not self._after_thinking:
            return content
        start = next((i for i, char in enumerate(content) if not go_space(char)), len(content))
        self._started = start < len(content)
        return content[start:]
