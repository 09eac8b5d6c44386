"""Gateway process: the Qwen3.5 XML tool-call markup's tags and names, and the text around a call (what follows its
</function>: answer text, the next call, stray text before its </tool_call>), which gateway.tool_markup reads by."""
from __future__ import annotations

import re
from typing import Optional

FUNCTION_OPEN = "<function="
FUNCTION_CLOSE = "</function>"
PARAM_OPEN = "<parameter="
PARAM_CLOSE = "</parameter>"
CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
STRUCTURE_TAGS = (PARAM_OPEN, FUNCTION_CLOSE, CALL_CLOSE)
# The markup's tags: answer text between two calls holds none of them (prose_then_call).
MARKUP_TAGS = (PARAM_OPEN, PARAM_CLOSE, FUNCTION_OPEN, FUNCTION_CLOSE, CALL_CLOSE)
# Tags whose start the model's end token may cut at the output's end (_Reader.cut_tag).
CUT_TAGS = (PARAM_CLOSE, PARAM_OPEN, FUNCTION_CLOSE, CALL_CLOSE)
# A name the markup can carry (<function=NAME>, <parameter=NAME>): a '>' ends the tag, a line break or control
# character breaks it, and the name is read trimmed (so it cannot be empty or start or end with a space).
MARKUP_NAME_RE = re.compile(r"^(?=\S)(?!.*\s$)[^\x00-\x1f\x7f>]+$", re.S)


# Characters no function name the model calls holds (an offered name never does): braces, quotes, '<'.
_NOT_IN_NAMES = frozenset('{}<"\'')


def names_function(text: str, start: int) -> Optional[bool]:
    """Whether the <function= name that starts at `start` can be a function's: not one holding template or markup
    characters ({{ tc.name }}, quotes, '<'), which is a model writing about the format (an unrendered template, pseudo-
    XML), not calling; vLLM's qwen3_coder refuses such a name rather than hand out a phantom call
    (_is_valid_function_name). None while its '>' is not written yet."""
    end = text.find(">", start)
    if _NOT_IN_NAMES & set(text[start:] if end < 0 else text[start:end]):
        return False
    return None if end < 0 else True


def prose_then_call(text: str, pos: int) -> bool:
    """Whether answer text and then the next <tool_call> follow pos, so that a call's end at pos ends the call: text
    between two calls ("<call A>\nNow the second:\n<call B>") is answer text, as Ollama's parser reads it (a call ends
    at its first </tool_call>, model/parsers/qwen3coder.go), not a value of call A running into call B because that
    reading ends the output. Text that holds a tag of the markup before that <tool_call> is no answer text: a value
    quoting the closing tags goes on past them."""
    found = text.find(CALL_OPEN, pos)
    if found < 0 or any(text.find(tag, pos, found) >= 0 for tag in MARKUP_TAGS):
        return False
    return _opens_at(text, found)


def _opens_at(text: str, found: int) -> bool:
    """Whether the <tool_call> at found opens a call (<function= or a JSON object follows), not mentions the tag."""
    return text.startswith((FUNCTION_OPEN, "{"), skip_space(text, found + len(CALL_OPEN)))


def no_call_after(text: str, pos: int) -> bool:
    """Whether every <tool_call> from pos is a mention of the tag (answer text), none opening a call."""
    return not any(_opens_at(text, pos + m.start()) for m in re.finditer(re.escape(CALL_OPEN), text[pos:]))


def stray_text_end(text: str, pos: int) -> Optional[int]:
    """Index after the </tool_call> that closes a call whose function (or JSON object) ended before pos, where the
    model wrote something else between them ("</function>\nDone.\n</tool_call>"): no tag of the markup and no next
    call in between. The call is the one written, the stray text is left out, as vLLM's qwen3_coder parser reads each
    <function=...</function> of the block and Ollama's reads the block's first function element (xml.Unmarshal,
    model/parsers/qwen3coder.go); a stream had sent the call as it read it. None where pos starts no such text."""
    close = text.find(CALL_CLOSE, pos)
    if close <= pos or any(text.find(tag, pos, close) >= 0 for tag in MARKUP_TAGS + (CALL_OPEN,)):
        return None
    return close + len(CALL_CLOSE)


def skip_space(text: str, pos: int, closers: tuple = ()) -> int:
    """The first index at or after `pos` that is no whitespace nor one of `closers` (len(text) when none)."""
    while pos < len(text) and (text[pos].isspace() or closers and text.startswith(closers, pos)):
        pos += 1 if text[pos].isspace() else len(next(tag for tag in closers if text.startswith(tag, pos)))
    return pos


def broken_param_end(text: str, pos: int) -> Optional[int]:
    """Where the <parameter= element at pos ends when its name is broken (a line break, nothing, or the element's end
    before its '>': `<parameter=` then a line break, `<parameter=ids: [1]</parameter>`, `<parameter=>`): after its
    </parameter>, else before the next <parameter= or the call's closing tag, else at the text's end; None otherwise.
    The value before it ends at its own </parameter>, as vLLM's Qwen3 parsers read a call (vllm-project/vllm#55495)."""
    if not text.startswith(PARAM_OPEN, pos):
        return None
    name_at, tags = pos + len(PARAM_OPEN), (PARAM_CLOSE, PARAM_OPEN, FUNCTION_CLOSE, CALL_CLOSE)
    close = text.find(">", name_at)
    name = text[name_at:] if close < 0 else text[name_at:close]
    ended = close >= 0 and any(tag[:-1] in name for tag in tags)   # an element's end before the '>' (vLLM's regex)
    if "\n" not in name and (close < 0 or name.strip()) and not ended:
        return None
    ends = {at: at + len(tag) * (tag == PARAM_CLOSE) for tag in tags if (at := text.find(tag, name_at)) >= 0}
    return ends[min(ends)] if ends else len(text)
