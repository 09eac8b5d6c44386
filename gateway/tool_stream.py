"""Gateway process: a choice's tool calls streamed as the model writes them: a call's id and name once its first
<parameter= tag (or its end) is read, then its arguments JSON in pieces, as OpenAI streams tool calls and vLLM's
qwen3_coder parser does (extract_tool_calls_streaming: the name, then a JSON fragment per parameter).

Every piece is a prefix of the arguments that the whole output reads (gateway.tools, which stays the one reading;
gateway.tool_preview reads the call being written):
a parameter's fragment goes out once its value certainly ends (its first </parameter> with its <parameter= lines
closed that the next parameter or the call's end follows: the reading tool_markup takes first), and a plain string
parameter's text goes out as it comes, escaped, up to anything that might end it (a </parameter>, a line that starts
with <parameter=, </function> or </tool_call>: a value whose </parameter> the model left out ends there). What the
whole reading settles later (a value quoting the markup, a missing </parameter>) goes out when the call is read.
Only a <tool_call> of an offered tool streams so (the XML form, or the JSON form: tool_preview_json); a bare <function=
goes out whole.
"""
from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Optional

from gateway.strict_json import load_json
from gateway.tool_preview import CallPreview
from gateway.tool_filter import ToolCallFilter
from gateway.tools import dump_arguments

log = logging.getLogger(__name__)


@dataclass
class CallDelta:
    """One piece of a streamed call: the call's index among the choice's calls, its id and name on its first piece
    (None after), a piece of its arguments JSON, and done on its last piece, with `whole`: the arguments the whole
    output reads (None where it reads no call). The pieces join to other text only where the model gave a parameter
    twice: they hold both keys (JSON readers take the last), `whole` the one object the unstreamed answer has."""
    index: int
    arguments: str = ""
    id: Optional[str] = None
    name: Optional[str] = None
    done: bool = False
    whole: Optional[str] = None

    def openai(self) -> dict:
        """The delta.tool_calls entry OpenAI streams: index, id, type and name first, then the arguments' pieces."""
        if self.id is None:
            return {"index": self.index, "function": {"arguments": self.arguments}}
        return {"index": self.index, "id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


def in_model_order(content: str, calls: list[CallDelta], texts_after: dict) -> list[tuple[str, object]]:
    """One piece of output as ("text", str) and ("call", CallDelta) in the order the model wrote them: the text before
    the calls, then each call's pieces followed, once done, by the text after it (texts_after: ToolCallStream's, the
    end of content), as the Responses API's items and /v1/messages' blocks follow the model's order."""
    after = "".join(texts_after.values())
    before = content[:len(content) - len(after)]
    pieces: list = [("text", before)] if before else []
    pending = dict(texts_after)
    for call in calls:
        pieces.append(("call", call))
        if call.done and call.index in pending:
            pieces.append(("text", pending.pop(call.index)))
    return pieces + [("text", text) for text in pending.values()]


def _continuation(sent: str, arguments: Optional[str], preview: CallPreview) -> str:
    """What follows the arguments sent to make the call's: the rest of them where they begin so (always but where a
    later part of the output settled a value otherwise, such as a parameter given twice); else the sent ones closed
    and each of the call's parameters not sent so, so the JSON is whole and reads as the call (a key sent twice: the
    last wins, as JSON readers take it and vLLM streams such a call). arguments None: the call read as no call, and
    what was sent is closed as it is."""
    if arguments is not None and arguments.startswith(sent):
        return arguments[len(sent):]
    if arguments is not None:
        log.warning("tool call %s: streamed arguments %r begin no reading of %r", preview.name, sent, arguments)
    if preview.closed:
        return ""
    try:
        final = load_json(arguments or "{}")
    except ValueError:
        final = {}
    pairs = [dump_arguments({key: value})[1:-1] for key, value in (final if isinstance(final, dict) else {}).items()]
    pairs = [pair for pair in pairs if pair not in preview.pairs]
    head = '"' if preview.open else ""
    return head + ("," if pairs and sent != "{" else "") + ",".join(pairs) + "}"


class ToolCallStream:
    """A choice's answer text and tool calls as CallDeltas, streamed (preview) or each call whole (the non-streamed
    answer, which reads the calls once the output is whole). The calls are ToolCallFilter's; the call being written
    (the first one it holds) is previewed."""

    def __init__(self, tools: list[dict], only_listed: bool = False, preview: bool = True):
        self.filter = ToolCallFilter(tools, only_listed)
        names = {(tool.get("function") or {}).get("name") for tool in tools}
        self._offered = frozenset(name for name in names if isinstance(name, str))
        self._names = self._offered if preview else frozenset()
        self._tools = tools
        self._preview: Optional[CallPreview] = None
        self._sent: Optional[str] = None     # the arguments the call being written has sent (None: not begun)
        self._sent_more: list[str] = []      # and the pieces sent after those (_sent_text joins them)
        self._synced = False                 # whether those are the preview's prefix as of its last grow
        self.num_calls = 0                   # calls begun
        # After finish: call index -> the text the model wrote after that call (the end of finish's text, in order).
        self.texts_after: dict = {}

    def push(self, text: str) -> tuple[str, list[CallDelta]]:
        """(content, call deltas) of a text piece: answer text, then the deltas of calls read whole or previewed."""
        content = self.filter.push(text)
        deltas = [delta for call in self.filter.take_ready() for delta in self._whole(call)]
        return content, deltas + self._previewed()

    def finish(self, reason: Optional[str], stop_string: bool = False) -> tuple[str, list[CallDelta], bool]:
        """(text still to emit, the last deltas, cut) at the output's end. A call begun that reads as no call was cut
        by max_tokens or a stop string (stop_string: one ended the output; cut: its arguments stay as sent, as OpenAI
        leaves a call cut so) or is malformed (its arguments are closed as read); its text is no answer text either
        way. Whole (no preview), a call so cut is the one a stream of the same output would have sent (_cut_call)."""
        held = self.filter.calls_text
        text, calls = self.filter.finish(reason, stop_string)
        cut = reason == "length" or stop_string
        if self._sent is None and not calls and cut and held and not self._names:
            cut_call = self._cut_call(held)
            if cut_call is not None:
                return "", [cut_call], True
        if self._sent is not None and not calls:
            rest = "" if cut else _continuation(self._sent_text(), None, self._preview)
            self._sent, self._sent_more = None, []
            return "", ([] if cut else [CallDelta(self.num_calls - 1, rest, done=True)]), cut
        deltas = [delta for call in calls or [] for delta in self._whole(call)]
        self.texts_after = {delta.index: after for delta, after in zip(deltas, self.filter.texts_after) if after}
        return text, deltas, reason == "length" and calls is None and bool(text)

    def _cut_call(self, held: str) -> Optional[CallDelta]:
        """The call max_tokens or a stop string cut, as far as a stream sends it: its id, name and the arguments
        previewed from the text held (a prefix of JSON that reads as no whole object), not done. The whole answer
        then says what the stream said: OpenAI and vLLM return such a call with its arguments cut (finish_reason
        "length"), Anthropic "an incomplete tool use block", the Responses API an incomplete function_call item.
        None where no stream would have begun the call (its name not read yet)."""
        preview = CallPreview(self._tools, self._offered)
        preview.grow(held)
        if not preview.begun:
            return None
        self.num_calls += 1
        return CallDelta(self.num_calls - 1, preview.prefix or "", f"call_{secrets.token_hex(12)}", preview.name)

    def _whole(self, call: dict) -> list[CallDelta]:
        """A call read whole: its rest when it was begun, else the whole call."""
        function, sent = call["function"], self._sent_text()
        preview, self._preview, self._sent, self._sent_more = self._preview, None, None, []
        if sent is None:
            self.num_calls += 1
            return [CallDelta(self.num_calls - 1, function["arguments"], call["id"], function["name"], done=True,
                              whole=function["arguments"])]
        rest = _continuation(sent, function["arguments"], preview)
        return [CallDelta(self.num_calls - 1, rest, done=True, whole=function["arguments"])]

    def _previewed(self) -> list[CallDelta]:
        text = self.filter.calls_text
        if not text or not self._names:
            return []
        if self._preview is None:
            self._preview = CallPreview(self._tools, self._names)
        grown = self._preview.grow(text)
        if not self._preview.begun:
            return []
        deltas = []
        if self._sent is None:
            self._sent, self._synced = "", False
            self.num_calls += 1
            deltas.append(CallDelta(self.num_calls - 1, "", f"call_{secrets.token_hex(12)}", self._preview.name))
        if grown is not None and self._synced:
            # What was sent is the prefix the last grow left: the new prefix is it and this piece.
            if grown:
                deltas.append(CallDelta(self.num_calls - 1, grown))
                self._sent_more.append(grown)
            return deltas
        prefix, sent = self._preview.prefix, self._sent_text()
        if len(prefix) > len(sent) and prefix.startswith(sent):
            deltas.append(CallDelta(self.num_calls - 1, prefix[len(sent):]))
            self._sent = sent = prefix
        self._synced = prefix == sent
        return deltas

    def _sent_text(self) -> Optional[str]:
        """The arguments the call being written has sent, joined (None: not begun)."""
        if self._sent_more:
            self._sent += "".join(self._sent_more)
            self._sent_more = []
        return self._sent
