"""Gateway process: ToolCallFilter, the streamed side of tool-call parsing: answer text goes out up to the first call
start (<tool_call> or a bare <function=), the calls are buffered and read by gateway/tools.py (whole, or each once the
next call has begun)."""
from __future__ import annotations

from typing import Optional

from gateway.tool_fences import Fences
from gateway.tools import (CALL_STARTS, TOOL_CALL_TAG, calls_after_prose, cut_opener, next_call, opens_call,
                           read_call_pieces, ready_call)


class ToolCallFilter:
    """Streams answer text up to the first call start (<tool_call> or a bare <function=), then buffers the calls to
    parse them whole.

    Whitespace and partial tags at the end of a piece are held back, so the answer text streamed
    before a call carries no trailing blank lines and never a fragment of the tag.
    """

    def __init__(self, tools: list[dict], only_listed: bool = False):
        self._tools = tools
        # OpenAI's allowed_tools: a call to a tool outside `tools` (offered, but not allowed) is no call, and stays
        # text.
        self._names = {(tool.get("function") or {}).get("name") for tool in tools} if only_listed else None
        self._held = ""
        self._calls_text: Optional[str] = None
        self._gap = ""          # whitespace held back before the first <tool_call>
        self._taken = 0         # calls take_ready gave already
        self._scanned = 0       # how much of the calls text take_ready has looked through for the next call's start
        self._fences = Fences()  # the fenced code blocks of the answer text sent, where a call start is an example
        # After finish: the text the model wrote after each call it returned, in order (their join ends its text).
        self.texts_after: list[str] = []

    @property
    def calls_text(self) -> Optional[str]:
        """The text from the first call not given yet on (None before the first call starts)."""
        return self._calls_text

    def push(self, text: str) -> str:
        """The answer text of a piece safe to send now; from the first call start on, text is kept to be parsed."""
        if self._calls_text is not None:
            self._calls_text += text
            return ""
        buf = self._held + text
        pos = next_call(buf, fences=self._fences)
        if pos >= 0 and opens_call(buf, pos) is None:
            # A <tool_call> with nothing after it yet: held, with the whitespace before it, until it shows what it is.
            text = buf[:pos].rstrip()
            self._held = buf[len(text):]
        elif pos >= 0:
            self._calls_text = buf[pos:]
            self._held = ""
            text = buf[:pos].rstrip()
            self._gap = buf[len(text):pos]
        else:
            keep = self._hold_len(buf)
            self._held = buf[len(buf) - keep:]
            text = buf[:len(buf) - keep]
        self._fences.feed(text)
        return text

    def take_ready(self) -> list[dict]:
        """The calls complete so far (each followed by the next call's start), taken out of what finish() parses:
        a stream can send each call as soon as it is known, as Ollama does (model/parsers/qwen3coder.go returns
        each call at its </tool_call>)."""
        calls = []
        # After text that follows a call taken, the calls wait for finish(): it reads that text as the answer's.
        while self._calls_text and self._calls_text.startswith(CALL_STARTS) and self._next_start_shown():
            ready = ready_call(self._calls_text, self._tools)
            if ready is None or not self._allowed([ready[0]]):
                break
            calls.append(ready[0])
            self._calls_text, self._scanned = self._calls_text[ready[1]:], 0
        self._taken += len(calls)
        return calls

    def _next_start_shown(self) -> bool:
        """Whether a call start ends in the text added since the last look: ready_call needs the next call's start
        after the call, and reading the whole call again on every piece made a long call's stream quadratic (15 s
        of gateway time for a 100 KB file)."""
        text, start = self._calls_text, max(1, self._scanned - max(map(len, CALL_STARTS)) + 1)
        self._scanned = len(text)
        return any(text.find(tag, start) >= 0 for tag in CALL_STARTS)

    def finish(self, reason: Optional[str] = None, stop_string: bool = False,
               drop_cut: bool = False) -> tuple[str, Optional[list[dict]]]:
        """(text still to emit, tool calls or None) at the end of the output, which `reason` ended (stop_string: a stop
        string did, not the model's end token): the text the model wrote between and after its calls comes with them.
        Unparseable call text is returned as text (after any calls take_ready gave: those stand); with drop_cut, call
        text that max_tokens or a stop string cut is dropped instead, as Ollama's parser drops a call it never saw
        closed (model/parsers/qwen3coder.go: the text after <tool_call> is only read at its </tool_call>)."""
        held, self._held = self._held, ""
        self.texts_after = []
        eos = reason == "stop" and not stop_string
        cut = drop_cut and (reason == "length" or stop_string)
        if self._calls_text is None:
            opener = held.find(TOOL_CALL_TAG)
            # A held <tool_call> the end token cut before its function's name: markup, and no call.
            return ("" if opener >= 0 and (cut or eos and cut_opener(held, opener)) else held), None
        read = read_call_pieces(self._calls_text, self._tools, open_end=reason == "stop",
                                after_calls=bool(self._taken), eos=eos)
        calls, pieces = read if read is not None and self._allowed(read[0]) else (None, [])
        later = None if calls is not None or self._taken else calls_after_prose(self._calls_text, self._tools, reason,
                                                                                 eos)
        if later is not None and self._allowed(later[1]):
            return self._gap + later[0], later[1]
        if calls is None and (cut or eos and cut_opener(self._calls_text, 0)):
            return "", None     # a call the end token cut before its name: markup, and no call
        opener = next_call(self._calls_text)
        if calls is None and eos and opener > 0 and cut_opener(self._calls_text, opener):
            return self._calls_text[:opener].strip(), None    # text after a call taken, then such an opener
        if calls is None:
            # Not a call after all: the text comes back whole, with the whitespace held before the first call.
            return ("" if self._taken else self._gap) + self._calls_text, None
        self.texts_after = pieces[1:]
        return "".join(pieces), calls

    def _allowed(self, calls: Optional[list]) -> bool:
        return self._names is None or all(call["function"]["name"] in self._names for call in calls or [])

    @staticmethod
    def _hold_len(buf: str) -> int:
        longest = max(len(tag) for tag in CALL_STARTS) - 1
        for size in range(min(len(buf), longest), 0, -1):
            if any(tag.startswith(buf[-size:]) for tag in CALL_STARTS):
                stripped = buf[:-size]
                return size + (len(stripped) - len(stripped.rstrip()))
        return len(buf) - len(buf.rstrip())
