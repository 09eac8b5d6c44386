"""Gateway process: where a parameter's value in the <tool_call> being written certainly ends, and how far its text
is certainly the value's (tool_preview streams it), read as tool_markup's whole reading takes the ends."""
from __future__ import annotations

from typing import Optional

from gateway.tool_markup import CALL_CLOSE, CALL_OPEN, FUNCTION_CLOSE, FUNCTION_OPEN, PARAM_CLOSE, PARAM_OPEN, \
    broken_param_end, skip_space

# Tags that, at a line's start, may end a value whose </parameter> the model left out (tool_markup's lenient reading).
_LINE_ENDS = ("\n" + PARAM_OPEN, "\n" + FUNCTION_CLOSE, "\n" + CALL_CLOSE)


def partial_tag(text: str, pos: int, tags: tuple) -> bool:
    """Whether text ends at or after pos inside one of tags (the rest of the tag may still come)."""
    if len(text) - pos >= max(map(len, tags)):
        return False     # no copy of a long rest (a value's text) that no tag can be
    rest = text[pos:]
    return any(len(rest) < len(tag) and tag.startswith(rest) for tag in tags)


def _call_ends(text: str, pos: int) -> Optional[bool]:
    """Whether the call's closers are at pos (tool_markup's _Reader._call_end) and the next call follows them, as the
    whole reading asks of a call's end that is not the output's; None while the text ends too soon to tell, or where
    other text follows (the output's end says which reading takes the call)."""
    if text.startswith(FUNCTION_CLOSE, pos):
        pos = skip_space(text, pos + len(FUNCTION_CLOSE))
        if not text.startswith(CALL_CLOSE, pos):
            # Text after a </function> may be stray text before the block's </tool_call> or answer text before the
            # output's end, each of which ends the call there (tool_markup's stray_text_end, _prose_after).
            return _next_call(text, pos) or None
    elif not text.startswith(CALL_CLOSE, pos):
        return False
    return _next_call(text, skip_space(text, pos + len(CALL_CLOSE))) or None


def _next_call(text: str, pos: int) -> Optional[bool]:
    """Whether the next call starts at pos; None while the text ends too soon to tell."""
    if pos == len(text) or partial_tag(text, pos, (CALL_CLOSE, CALL_OPEN, FUNCTION_OPEN)):
        return None
    return text.startswith((CALL_OPEN, FUNCTION_OPEN), pos)


def follows_value(text: str, pos: int) -> Optional[bool]:
    """Whether the next <parameter=NAME> or the call's end is at pos (tool_markup's _may_follow), also after a
    <parameter= element whose name is broken (tool_markup.broken_param_end); None while the text ends too soon to
    tell."""
    if pos == len(text) or partial_tag(text, pos, (PARAM_OPEN, FUNCTION_CLOSE, CALL_CLOSE)):
        return None
    if not text.startswith(PARAM_OPEN, pos):
        return _call_ends(text, pos)
    broken = broken_param_end(text, pos)
    if broken is not None:
        return follows_value(text, skip_space(text, broken))
    close = text.find(">", pos)
    name = text[pos + len(PARAM_OPEN):len(text) if close < 0 else close]
    if "\n" in name or (close >= 0 and not name.strip()):
        return None      # a broken name: its </parameter> is not written yet
    return None if close < 0 else True


def value_end(text: str, start: int) -> tuple[Optional[tuple[int, int]], int]:
    """((end, index after its </parameter>) of the value from start where it certainly ends, or None; how far its
    text is certainly the value's (what may end it comes no earlier)). The ends are tool_markup's _value_ends, the
    first plain one taken: a </parameter> that the next parameter or the call's end follows, with the value's
    <parameter= lines closed."""
    return ValueScan(start)(text)


class ValueScan:
    """value_end of the value from `start` in a text that only grows (the call being written), each call looking
    at the text added since the last one (and a tag's length before it): the value's first line-end tags, its last
    line break and the </parameter>s whose reading is settled are kept. Searching the whole value again for every
    piece made a long value's stream quadratic (a 32k-token parameter: 62 -> 215 us of gateway CPU a token,
    bench/long_output.py)."""

    def __init__(self, start: int):
        self.start = start
        self._num_scanned = start - 1   # the text before this was searched (for the line ends and line breaks)
        self._line_ends: dict = {}      # tag of _LINE_ENDS -> where it is first
        self._last_break = -1           # the last "\n" from start - 1 on
        # The </parameter>s read for good (no end of the value, or one that open <parameter= lines hold): the
        # balance of those lines and where it was counted to, where the next one is looked for, and the first of
        # them that the next parameter or the call's end follows (the value's text is certain up to it only).
        self._num_open, self._counted, self._close_from, self._closes_safe = 0, start, start, None

    def __call__(self, text: str) -> tuple[Optional[tuple[int, int]], int]:
        start, scanned = self.start, self._num_scanned
        for tag in _LINE_ENDS:
            if tag not in self._line_ends and (pos := text.find(tag, max(start - 1, scanned - len(tag) + 1))) >= 0:
                self._line_ends[tag] = pos
        self._last_break = max(self._last_break, text.rfind("\n", max(start - 1, scanned)))
        self._num_scanned = len(text)
        safe = min([pos + 1 for pos in self._line_ends.values()] + [len(text)])
        line = self._last_break + 1
        if line >= start and partial_tag(text, line, tuple(tag[1:] for tag in _LINE_ENDS)):
            safe = min(safe, line)
        tail = text.rfind("<", max(start, len(text) - len(PARAM_CLOSE) + 1))
        if tail >= 0 and partial_tag(text, tail, (PARAM_CLOSE,)):
            safe = min(safe, tail)
        if self._closes_safe is not None:
            safe = min(safe, self._closes_safe)
        return self._closes(text, safe)

    def _closes(self, text: str, safe: int) -> tuple[Optional[tuple[int, int]], int]:
        """The </parameter>s not read for good yet, from the first; one that the text ends too soon to read is read
        again next time."""
        close = text.find(PARAM_CLOSE, self._close_from)
        while close >= 0:
            counted = self._counted
            num_open = (self._num_open + text.count("\n" + PARAM_OPEN, counted - 1, close)
                        - text.count(PARAM_CLOSE, counted, close))
            after = close + len(PARAM_CLOSE)
            follows = follows_value(text, skip_space(text, after))
            if follows is not False:
                safe = min(safe, close)
            if follows and num_open <= 0:
                return (close, after), safe
            if follows is None:
                return None, safe
            if follows and self._closes_safe is None:
                self._closes_safe = close
            self._num_open, self._counted, self._close_from = num_open, close, close + 1
            close = text.find(PARAM_CLOSE, close + 1)
        self._close_from = max(self._close_from, len(text) - len(PARAM_CLOSE) + 1)
        return None, safe
