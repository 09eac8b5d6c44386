"""Gateway process: the Markdown fenced code blocks of a model's answer text, in which a <tool_call> is an example of
the format the model shows, not a call (vllm-project/vllm#57541: vLLM's Qwen3 parser keeps a fenced example as
content, tests/parser/engine/test_qwen3_fenced_examples.py)."""
from __future__ import annotations

from typing import Optional

# CommonMark 0.31 4.5: a code fence is a run of at least three backticks or tildes, indented up to three spaces.
_FENCE_CHARS = "`~"
_MIN_RUN = 3
_MAX_INDENT = 3
# A longer line is read as no fence line (a fence's info string is a word or two): only this much of the line being
# written is kept, so a long answer line costs no copy of itself a piece.
_MAX_FENCE_LINE = 256


def fence_run(line: str) -> Optional[str]:
    """The fence (its run of backticks or tildes) that a line opens or closes a fenced code block with, or None: a
    run of three or more indented up to three spaces, and for backticks no backtick after it (inline code such as
    ```x``` opens none)."""
    text = line.lstrip(" ")
    if len(line) - len(text) > _MAX_INDENT or text[:1] not in tuple(_FENCE_CHARS):
        return None
    run = len(text) - len(text.lstrip(text[0]))
    if run < _MIN_RUN or (text[0] == "`" and "`" in text[run:]):
        return None
    return text[:run]


class Fences:
    """Whether the answer text read so far has a fenced code block open, read line by line as it grows: a fence line
    opens one, and a line of the same character, at least as long and with nothing after it, closes it."""

    def __init__(self, opened: Optional[str] = None, line: str = ""):
        self.opened = opened    # the open block's fence, None outside one
        self._line = line       # the last line read so far (its end not written yet)

    def copy(self) -> "Fences":
        """A Fences that reads on from this one's state, leaving it as it is."""
        return Fences(self.opened, self._line)

    def feed(self, text: str) -> None:
        """Reads text, the answer text after what was read; each line counts once its line break is read."""
        if "\n" not in text:
            self._line = (self._line + text[:_MAX_FENCE_LINE + 1])[:_MAX_FENCE_LINE + 1]
            return
        lines = (self._line + text).split("\n")
        self._line = lines.pop()[:_MAX_FENCE_LINE + 1]
        for line in lines:
            self._read_line(line.rstrip("\r"))

    def _read_line(self, line: str) -> None:
        run = fence_run(line) if len(line) <= _MAX_FENCE_LINE else None
        if run is None:
            return
        if self.opened is None:
            self.opened = run
        elif run[0] == self.opened[0] and len(run) >= len(self.opened) and not line.strip()[len(run):].strip():
            self.opened = None
