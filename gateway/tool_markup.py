"""Gateway process: reads one Qwen3.5 XML tool call (<function=NAME><parameter=P>VALUE</parameter>...) by its
structure (gateway.tool_values types each value from the tool's schema).

The XML has no escaping, so a value may hold the markup itself (a file that mentions </tool_call>, a command that
prints <parameter=x>...</parameter>). A `</parameter>` ends a value only where what follows it is the next
parameter or the end of the function, and the whole call then reads to its `</tool_call>`; the first such reading
wins (ninfer#138, Rapid-MLX#1515: a first-match regex cut those values and lost the call), one that leaves a
`<parameter=` line of the value unclosed last. A `</parameter>` the model left out is read as vLLM's qwen3_coder
parser reads it (_find_true_param_end's fallbacks): the value ends at the tool's next parameter on a line of its
own, or at the call's end, or, where the model's own end (eos) ended the output inside it, at the output's end
(_parse_xml_function_call's last fallback: the value runs to the end of the text).
"""
from __future__ import annotations

from typing import Callable, Iterator, Optional

# The markup's vocabulary, re-exported for the modules that read it from here.
from gateway.tool_markup_text import (CALL_CLOSE, CALL_OPEN, CUT_TAGS, FUNCTION_CLOSE, FUNCTION_OPEN,  # noqa: F401
                                      MARKUP_NAME_RE, MARKUP_TAGS, PARAM_CLOSE, PARAM_OPEN, STRUCTURE_TAGS,
                                      broken_param_end, names_function, no_call_after, prose_then_call, skip_space,
                                      stray_text_end)

# Readings tried per call before giving up (each a </parameter> that the next parameter or </function> follows),
# and parameters per call: they bound what a hostile output costs (and the reader's recursion).
_MAX_TRIES = 1024
_MAX_PARAMS = 256


class _Reader:
    """One call's text from just after `<function=NAME>`; `whole`: its end must end the text or be followed by the
    next call; `open_end`: the model ended the output itself (eos or a stop string, not max_tokens), so a
    call it closed with the output's end is whole; `eos`: its end token did (not a stop string), so a value it left
    open at the output's end ends there."""

    def __init__(self, text: str, whole: bool, open_end: bool = False, names: Optional[frozenset] = None,
                 lenient: bool = False, eos: bool = False, wrapped: bool = True):
        self.text, self.whole, self.open_end, self.eos = text, whole, open_end, open_end and eos
        # Whether a <tool_call> opened the call: a bare <function= block that prose follows stays text (prose that
        # shows the syntax), so only a wrapped call ends at a </function> that text follows (_prose_after).
        self.wrapped = wrapped
        # The tool's parameter names (None: not known, any name) and whether the readings past the plain ones are
        # tried (a missing </parameter>, an unclosed <parameter= line): only in a whole output, as more text may
        # still give a plain reading.
        self.names, self.lenient = names, lenient
        self.tries = _MAX_TRIES

    def call_starts(self, pos: int) -> bool:
        """Whether the next call starts at pos: its <tool_call>, or a bare <function= (a wrapper the model dropped)."""
        return self.text.startswith(CALL_OPEN, pos) or self.text.startswith(FUNCTION_OPEN, pos)

    def name_at(self, pos: int) -> Optional[tuple[str, int]]:
        """(name, index after '>') of a <parameter=NAME> at pos."""
        if not self.text.startswith(PARAM_OPEN, pos):
            return None
        end = self.text.find(">", pos + len(PARAM_OPEN))
        name = self.text[pos + len(PARAM_OPEN):end].strip() if end >= 0 else ""
        if not name or "\n" in name:
            return None
        return name, end + 1

    def params(self, pos: int, depth: int = 0, seen: frozenset = frozenset()) -> Optional[tuple[list, int]]:
        """([(name, raw value)], index after </tool_call>) of the parameters from pos on, or None."""
        pos = skip_space(self.text, pos)
        end = self._call_end(pos)
        if end is None and self.cut_tag(pos):
            return [], len(self.text)
        if end is not None:
            # A closing tag repeated after the call is markup between calls (read_call_pieces drops it).
            after = skip_space(self.text, end, (CALL_CLOSE, FUNCTION_CLOSE))
            if self.whole and after < len(self.text) and not (self.call_starts(after) or
                                                               prose_then_call(self.text, after)):
                return None
            return [], end
        broken = broken_param_end(self.text, pos)
        if broken is not None and depth < _MAX_PARAMS:
            return self.params(broken, depth + 1, seen)
        opened = self.name_at(pos)
        if opened is None and depth == 0 and self.lenient:
            return self._after_stray_text(pos, seen)
        if opened is None or depth >= _MAX_PARAMS:
            return None
        name, start = opened
        start += self.text.startswith("\n", start)
        seen = seen | {name}
        for end, after in self._value_ends(start, seen):
            if self.tries <= 0:
                break
            self.tries -= 1
            rest = self.params(after, depth + 1, seen)
            if rest is not None:
                value = self.text[start:end]
                return [(name, value[:-1] if value.endswith("\n") else value)] + rest[0], rest[1]
        return None

    def _after_stray_text(self, pos: int, seen: frozenset) -> Optional[tuple[list, int]]:
        """The parameters from the first <parameter= on a line of its own after pos, where the model wrote something
        else between <function=NAME> and it (a repeated <function=NAME>, a stray </parameter>, a word): vLLM's
        qwen3_coder reads a call's parameters from its first structural <parameter= wherever it stands
        (_next_structural_param_start). Only in a whole output, and not past the call's own end or the next call."""
        found = self.text.find("\n" + PARAM_OPEN, pos)
        stray = self.text[pos:found]
        if found < 0 or any(tag in stray for tag in (CALL_OPEN, CALL_CLOSE, FUNCTION_CLOSE)):
            return None
        return self.params(found + 1, 1, seen)

    def _value_ends(self, start: int, seen: frozenset) -> Iterator[tuple[int, int]]:
        """(end of the value from start, where the next parameter or the call's end is read) for each way the value
        may end, best first: a </parameter> that the next parameter or the call's end follows, with the <parameter=
        lines inside the value closed inside it; then, only in a lenient reading (a stream waits for the whole
        output before it reads these), where its </parameter> is missing, then a </parameter> that leaves a
        <parameter= line of the value open."""
        unbalanced, closed = [], False
        num_open, counted = 0, start
        close = self.text.find(PARAM_CLOSE, start)
        while close >= 0:
            num_open += self.text.count("\n" + PARAM_OPEN, counted - 1, close) - self.text.count(
                PARAM_CLOSE, counted, close)
            counted = close
            after = close + len(PARAM_CLOSE)
            follows = skip_space(self.text, after)
            # Closed, as vLLM's _find_true_param_end finds a close: the next parameter or a closer follows it.
            closed |= num_open <= 0 and (follows == len(self.text) or self.text.startswith(STRUCTURE_TAGS, follows))
            if self._may_follow(follows):
                if num_open <= 0:
                    yield close, after
                else:
                    unbalanced.append((close, after))
            close = self.text.find(PARAM_CLOSE, close + 1)
        if self.lenient:
            if not closed:
                yield from self._missing_close_ends(start, seen)
            yield from unbalanced

    def _missing_close_ends(self, start: int, seen: frozenset) -> Iterator[tuple[int, int]]:
        """Ends of a value whose </parameter> the model left out, at a line's start: the next <parameter=NAME>, NAME
        one of the tool's parameters not given yet (any name when they are not known), or the call's closing tags;
        last the output's end where the model's eos ended it there (a value a stop string cut is no whole value)."""
        at = start if self.text.startswith("\n", start - 1) else self.text.find("\n", start) + 1
        while 0 < at <= len(self.text):
            opened = self.name_at(at)
            if opened is not None and opened[0] not in seen and (self.names is None or opened[0] in self.names):
                yield at, at
            if self.text.startswith((FUNCTION_CLOSE, CALL_CLOSE), at) and self._call_end(at) is not None:
                yield at, at
            at = self.text.find("\n", at) + 1
        if self.eos:
            end = self._before_cut_tag(start)
            yield end, end

    def _call_end(self, pos: int) -> Optional[int]:
        """Index after the call's closers at pos: </function> then </tool_call>. One a model drops is read as vLLM's
        qwen3_coder reads it: </tool_call> alone closes the call, </function> alone does before the next call or
        at the output's end where the model ended it (open_end); None when no close is at pos."""
        at_end = self.open_end and pos == len(self.text)
        if self.text.startswith(FUNCTION_CLOSE, pos):
            pos = skip_space(self.text, pos + len(FUNCTION_CLOSE))
            if self.cut_tag(pos):
                return len(self.text)
            stray = stray_text_end(self.text, pos) if self.wrapped else None
            if stray is not None:
                return stray
            at_end = (self.open_end and pos == len(self.text)) or self.call_starts(pos) or self._prose_after(pos)
        elif not (self.text.startswith(CALL_CLOSE, pos) or at_end):
            return None
        if self.text.startswith(CALL_CLOSE, pos):
            return pos + len(CALL_CLOSE)
        return pos if at_end else None

    def _prose_after(self, pos: int) -> bool:
        """Whether answer text follows a </function> at pos, its </tool_call> left out: text with no tag of the
        markup (a <tool_call> that opens no call is a mention, text), then the next call or the end of an output the
        model ended itself. vLLM's qwen3_coder ends the
        function at that </function> (_scan_to_structural_function_end) and hands out the call; the whole reading
        made the call text and a stream sent the value with '</parameter>' in it."""
        if not self.wrapped:
            return False
        if prose_then_call(self.text, pos):
            return True
        rest = self.text[pos:pos + len(CALL_CLOSE)]
        # A </tool_call> that the output's end cut is no text (cut_tag reads it where the end token cut it).
        return self.open_end and bool(rest) and not CALL_CLOSE.startswith(rest) and no_call_after(self.text, pos) \
            and not any(self.text.find(tag, pos) >= 0 for tag in MARKUP_TAGS)

    def _may_follow(self, pos: int) -> bool:
        broken = broken_param_end(self.text, pos)
        return self._call_end(pos) is not None or self.name_at(pos) is not None or self.cut_tag(pos) or (
            broken is not None and self._may_follow(skip_space(self.text, broken)))

    def cut_tag(self, pos: int) -> bool:
        """Whether the text from pos to the output's end is a tag the model's end token (eos) cut: the start of a
        </parameter>, <parameter=, </function> or </tool_call>, or a <parameter=NAME whose '>' never came. It is
        markup, not a value: the call is the parameters written before it, as vLLM's qwen3_coder streams them (a
        parameter goes out once its name's '>' is read, and the call finishes tool_calls)."""
        rest = self.text[pos:]
        if not (self.eos and rest) or ">" in rest or "\n" in rest:
            return False
        return rest.startswith(PARAM_OPEN) or any(tag.startswith(rest) for tag in CUT_TAGS)

    def _before_cut_tag(self, start: int) -> int:
        """Where a value from start that runs to the output's end ends: before a tag the end token cut on its last
        line (its '</param' or '<parameter=comm'), or a '</' started right after the value's text."""
        line = max(self.text.rfind("\n", start) + 1, start)
        if self.cut_tag(line):
            return line
        close = self.text.rfind("</", line)
        return close if close >= 0 and PARAM_CLOSE.startswith(self.text[close:]) else len(self.text)


def read_function(text: str, pos: int, open_end: bool = False, param_names: Callable = lambda name: None,
                  lenient: bool = False, eos: bool = False) -> Optional[tuple[str, list, int]]:
    """(name, [(parameter, raw value)], index after </tool_call>) of the <function=...> at pos, or None when
    malformed. Readings that end the output (or reach the next call) come first, then ones with other text after
    the call. param_names(name): the tool's parameter names or None; lenient: the output is whole, so a value
    whose </parameter> is missing may end without it; eos: the model's end token ended the output (see _Reader).
    The values are typed from the tool's schema by gateway.tool_values."""
    end = text.find(">", pos + len(FUNCTION_OPEN))
    name = text[pos + len(FUNCTION_OPEN):end].strip() if end >= 0 else ""
    if not name or "\n" in name:
        return None
    before = pos
    while before > 0 and text[before - 1].isspace():
        before -= 1
    wrapped = text.startswith(CALL_OPEN, before - len(CALL_OPEN))
    for whole in (True, False):
        read = _Reader(text, whole, open_end, param_names(name), lenient, eos, wrapped).params(end + 1)
        if read is not None:
            return name, read[0], read[1]
    return None
