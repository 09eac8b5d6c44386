"""Gateway process: llama.cpp's n_indent, "the minimum line indentation for the generated text in number of whitespace
characters" (tools/server/README.md, /completion and /infill options): a line after the first that starts with fewer
spaces or tabs ends the output before its first other character, stop_type "limit" (server-context.cpp process_token:
it erases generated_text from that character and stops; an empty line's newline is such a character), so a code
completion stays in the cursor's scope."""
from __future__ import annotations


class IndentLimit:
    """Cuts a choice's answer text where a line after a newline starts less indented than `n` (0: never)."""

    def __init__(self, n: int):
        self.n = n
        self._indent: int = -1      # the current line's leading whitespace so far; -1: past it (or the first line)
        self.hit = False

    def push(self, text: str) -> str:
        """The part of `text` before the first under-indented line's first character (all of it where none)."""
        if self.n <= 0 or self.hit:
            return "" if self.hit else text
        for i, char in enumerate(text):
            if self._indent >= 0 and char in " \t":
                self._indent += 1
                continue
            if self._indent >= 0 and self._indent < self.n:
                # a character past the line's indentation, a newline too: llama.cpp stops at an empty line as well
                self.hit = True
                return text[:i]
            self._indent = 0 if char == "\n" else -1
        return text
