"""Gateway process: splits the model's <think>...</think> text into reasoning and answer, streamed or not."""
from __future__ import annotations

from gateway.tool_fences import Fences
from gateway.tool_markup import names_function
from gateway.tools import read_tool_calls

THINK_START = "<think>"
THINK_END = "</think>"
TOOL_CALL = "<tool_call>"
# What follows <tool_call> when it opens a call: the XML function form or the Hermes JSON form.
_CALL_STARTS = ("<function=", "{")


def hides_reasoning(body: dict) -> bool:
    """vLLM's include_reasoning: false (OpenRouter's too) and OpenRouter's reasoning.exclude: the thinking is split
    out of the answer but not returned, streamed or not."""
    return body.get("include_reasoning") is False or bool((body.get("reasoning") or {}).get("exclude"))


def unseparated_reasoning(body: dict) -> bool:
    """SGLang's separate_reasoning: false: nothing is split, the answer's content is the text as the model generated
    it (the thinking, its </think> and the answer), as SGLang's serving_chat returns it without its reasoning parser."""
    return body.get("separate_reasoning") is False


def held_reasoning(body: dict) -> bool:
    """SGLang's stream_reasoning: false: a stream sends the reasoning in one delta once it ends (at the answer, a call
    or the finish), as SGLang's ReasoningParser buffers it, instead of piece by piece."""
    return body.get("stream_reasoning") is False


def prompt_opens_thinking(prompt: str) -> bool:
    """Whether the prompt leaves a <think> block open (its last <think> after its last </think>), as vLLM reads the
    prompt (the qwen3 parser's is_reasoning_end over the prompt ids): the generation prompt's <think>, or an assistant
    turn continued (continue_final_message) from inside its thinking."""
    return prompt.rfind(THINK_START) > prompt.rfind(THINK_END)


def ids_open_thinking(ids: list, card) -> bool:
    """prompt_opens_thinking over a prompt's token ids (raw prompts read <think> and </think> as their tokens)."""
    start, end = card.token_id(THINK_START), card.token_id(THINK_END)
    for token_id in reversed(ids):
        if token_id == start or token_id == end:
            return token_id == start
    return False


def opened_think(prompt: str) -> str:
    """The <think> tag a prompt that opens thinking ends with, and the whitespace after it (Qwen's generation prompt
    writes "<think>\n"): the start of the thinking, which the model then does not write itself."""
    rest = prompt[prompt.rfind(THINK_START) + len(THINK_START):]
    return THINK_START + rest[:len(rest) - len(rest.lstrip())]


def split_whole(text: str, thinking_open: bool) -> tuple[str, str]:
    """(reasoning, content) of a whole output, as a stream of it splits."""
    splitter = ReasoningSplitter(thinking_open)
    reasoning, content = splitter.push(text)
    tail_reasoning, tail_content = splitter.flush()
    return reasoning + tail_reasoning, content + tail_content


def _partial_tail(buf: str, tag: str) -> int:
    """Length of the longest suffix of buf that is a proper prefix of tag."""
    # Such a suffix starts with the tag's first character ("<"): most pieces have none near their end (called twice a
    # streamed token).
    if tag[0] not in buf[1 - len(tag):]:
        return 0
    for size in range(min(len(buf), len(tag) - 1), 0, -1):
        if tag.startswith(buf[-size:]):
            return size
    return 0


def _mention(opened: str) -> bool:
    """Whether the text after a <tool_call> starts like a call but opens none: the XML form with a name no function
    has (tool_markup.names_function: a template or pseudo-markup the model writes about), or a brace that no JSON
    key follows ("<tool_call>{...}", as gateway.tools.opens_call reads the answer): a mention of the tag."""
    if opened.startswith("{"):
        key = opened[1:].lstrip()
        return bool(key) and not key.startswith('"')
    return opened.startswith(_CALL_STARTS[0]) and names_function(opened, len(_CALL_STARTS[0])) is False


def _opens_call(opened: str) -> bool:
    """Whether the text after a <tool_call> opens a call whatever follows (no later text makes it a _mention): a JSON
    object's first key has begun, or a <function= name whose '>' is written reads as a function's."""
    if opened.startswith("{"):
        return opened[1:].lstrip().startswith('"')
    return opened.startswith(_CALL_STARTS[0]) and names_function(opened, len(_CALL_STARTS[0])) is True


def _only_calls(held: str) -> bool:
    """Whether the thinking from a held <tool_call> to its </think> is calls alone: it opens a call, ends with a
    </tool_call> (blanks after it) and reads as calls with no text beside them (broken markup stays reasoning)."""
    if not (_opens_call(held[len(TOOL_CALL):].lstrip()) and held.rstrip().endswith("</tool_call>")):
        return False
    read = read_tool_calls(held, [], open_end=True)
    return read is not None and not read[1].strip()


class ThinkingTokens:
    """Counts a choice's generated ids that are thinking, as vLLM counts usage's reasoning_tokens (its reasoning
    parser's count_reasoning_tokens over the output ids, vLLM #45802): the ids after the first <think> (else from the
    start, when the prompt opened the thinking) up to the first </think>, both tags left out. The text is never
    tokenized again: a piece such as an unfinished character or "l" + "l" reads back as other tokens."""

    def __init__(self, thinking_open: bool, card):
        self._start, self._end = card.token_id(THINK_START), card.token_id(THINK_END)
        # "before": no <think> yet, "open": counting, "done": closed (later ids are the answer).
        self._state = "open" if thinking_open else "before"
        self._started = False   # a <think> was generated: the count starts after the first one
        self.count = 0

    def push(self, token_ids: list) -> None:
        """Counts the thinking ids among a choice's newly generated token ids."""
        for token_id in token_ids:
            if token_id == self._start and not self._started and self._state != "done":
                self._state, self._started, self.count = "open", True, 0
            elif self._state == "open":
                if token_id == self._end:
                    self._state = "done"
                else:
                    self.count += 1


class ReasoningSplitter:
    """Feed text pieces; get (reasoning, content) pieces whose concatenations are the final split.

    Follows vLLM's qwen3 reasoning parser: when the prompt already opened `<think>` (thinking on) all
    output up to `</think>` is reasoning; a `<think>` the model writes at the very start is dropped and
    also opens reasoning; output that never closes stays reasoning. A `<tool_call>` that opens a call
    (`<function=` or a JSON object follows) and is never followed by `</think>` ends reasoning: the call is
    answer text. Until that is known the call is held back, so a call (or a mention of the tag) inside
    reasoning that `</think>` later closes stays reasoning, streamed or not, and is never parsed as a call, unless
    the thinking ends with the calls and the output ends with nothing after `</think>`: then they are the answer, as
    Ollama's Qwen3.5 parser (a <tool_call> ends the thinking) and transformers serve read them; vLLM's qwen3 parser
    drops that call (vllm#39056, an agent loop ended on an empty answer). Newlines right after `</think>` are dropped
    from the answer. Tags split across pieces are held back.
    """

    def __init__(self, thinking_open: bool):
        # "start": nothing seen yet, "reasoning": inside <think>, "call": a <tool_call> in reasoning held back
        # (self._held) until </think> or the end says what it is, "closed": the thinking closed right after its calls
        # (self._closed_calls), held until answer text (they were reasoning) or the end (they are the answer),
        # "after": just closed, "content".
        self._state = "reasoning" if thinking_open else "start"
        self._skip_open_tag = True
        self._held = ""
        self._closed_calls = ""
        # A call held (state "call") whose start reads as a call for good (_opens_call): the pieces pushed after
        # self._held, their length, and the held text's last characters (where a </think> may begin). Such a call is
        # held to </think> or the end, maybe thousands of tokens: it is neither searched nor copied again a piece
        # (both were, every token: O(n^2) over a long call in the thinking; bench/long_output.py).
        self._call_read = False
        self._more: list[str] = []
        self._num_more = 0
        self._tail = ""
        self._fences = Fences()  # the fenced code blocks of the reasoning returned, where a call is an example

    @property
    def held(self) -> int:
        """Characters pushed but not returned yet (a tag or call not complete)."""
        return len(self._held) + self._num_more + len(self._closed_calls)

    def push(self, text: str) -> tuple[str, str]:
        """(reasoning, content) of a new text piece; text that may still turn out either way is held back."""
        if self._call_read:
            # Only a </think> that ends in the new text can close the held call (one before it closed it then).
            seen = self._tail + text
            if THINK_END not in seen:
                self._more.append(text)
                self._num_more += len(text)
                self._tail = seen[1 - len(THINK_END):]
                return "", ""
        buf = self._take_held() + text
        reasoning, content = [], []
        while buf:
            buf = self._step(buf, reasoning, content)
        self._fences.feed("".join(reasoning))
        return "".join(reasoning), "".join(content)

    def _take_held(self) -> str:
        """The held text, whole; nothing is held after."""
        held = self._held + "".join(self._more)
        self._held, self._more, self._num_more, self._call_read = "", [], 0, False
        return held

    def flush(self) -> tuple[str, str]:
        """(reasoning, content) of whatever is held back once the output ended."""
        held = self._take_held()
        if self._state == "reasoning":
            return held, ""
        if self._state == "call":
            opened = held[len(TOOL_CALL):].lstrip()
            if not opened.startswith(_CALL_STARTS) or _mention(opened):
                # Cut before anything but the tag: only a mention, part of the reasoning.
                return held, ""
            # A call never closed by </think>: it ends the reasoning and is the answer.
            return "", held
        if self._state == "closed":
            # Nothing but blanks after the </think> that closed the calls: they are the answer.
            calls, self._closed_calls = self._closed_calls, ""
            return "", calls
        return "", held.lstrip("\n") if self._state == "after" else held

    def _step(self, buf: str, reasoning: list, content: list) -> str:
        """Consumes part of buf into reasoning/content; returns the unconsumed rest ("" when held)."""
        if self._state == "start":
            stripped = buf.lstrip()
            if stripped.startswith(THINK_START):
                self._state = "reasoning"
                return stripped[len(THINK_START):]
            if THINK_START.startswith(stripped):
                self._held = buf
                return ""
            self._state = "content"
            return buf
        if self._state == "reasoning":
            return self._step_reasoning(buf, reasoning)
        if self._state == "call":
            return self._step_call(buf, reasoning)
        if self._state == "closed":
            if not buf.strip():
                self._held = buf
                return ""
            # Answer text after the </think>: the calls before it were part of the reasoning.
            reasoning.append(self._closed_calls)
            self._closed_calls, self._state = "", "after"
            return buf
        if self._state == "after":
            rest = buf.lstrip("\n")
            if rest:
                self._state = "content"
            return rest
        content.append(buf)
        return ""

    def _step_reasoning(self, buf: str, reasoning: list) -> str:
        if self._skip_open_tag:
            # The model may repeat the opening tag the prompt already wrote.
            stripped = buf.lstrip("\n")
            if stripped.startswith(THINK_START):
                buf = stripped[len(THINK_START):]
                self._skip_open_tag = False
            elif THINK_START.startswith(stripped):
                self._held = buf
                return ""
            else:
                self._skip_open_tag = False
        end = buf.find(THINK_END)
        call = buf.find(TOOL_CALL)
        if call >= 0 and (end < 0 or call < end) and self._fenced(reasoning, buf[:call]):
            # A call shown in a fenced code block is an example of the format: reasoning text (gateway/tool_fences.py).
            reasoning.append(buf[:call + len(TOOL_CALL)])
            return buf[call + len(TOOL_CALL):]
        if call >= 0 and (end < 0 or call < end):
            reasoning.append(buf[:call])
            self._state = "call"
            return self._step_call(buf[call:], reasoning)
        if end >= 0:
            reasoning.append(buf[:end])
            self._state = "after"
            return buf[end + len(THINK_END):]
        keep = max(_partial_tail(buf, THINK_END), _partial_tail(buf, TOOL_CALL))
        reasoning.append(buf[:len(buf) - keep])
        self._held = buf[len(buf) - keep:]
        return ""

    def _fenced(self, reasoning: list, before: str) -> bool:
        """Whether the reasoning so far, this push's pieces and `before` leave a fenced code block open."""
        fences = self._fences.copy()
        fences.feed("".join(reasoning) + before)
        return fences.opened is not None

    def _step_call(self, buf: str, reasoning: list) -> str:
        """buf starts with <tool_call>: hold it while it may be a call not followed by </think>."""
        if THINK_END in buf:
            # Closed by </think>: the call (or the tag) was part of the reasoning, unless the thinking ends with the
            # calls and nothing follows in the answer (state "closed").
            end = buf.find(THINK_END)
            if _only_calls(buf[:end]):
                self._closed_calls, self._state = buf[:end], "closed"
            else:
                reasoning.append(buf[:end])
                self._state = "after"
            return buf[end + len(THINK_END):]
        opened = buf[len(TOOL_CALL):].lstrip()
        if opened and (not any(start.startswith(opened[:len(start)]) for start in _CALL_STARTS)
                       or _mention(opened)):
            # Only a mention of the tag: it stays reasoning, and what follows is read as reasoning again.
            reasoning.append(TOOL_CALL)
            self._state = "reasoning"
            return buf[len(TOOL_CALL):]
        self._held = buf
        self._call_read, self._tail = _opens_call(opened), buf[1 - len(THINK_END):]
        return ""
