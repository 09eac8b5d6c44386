"""Gateway process: one choice's text pipeline, token ids -> detokenizer -> stop strings -> reasoning split."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Union

from gateway.indent_limit import IndentLimit
from gateway.model import ModelCard
from gateway.reasoning import ReasoningSplitter, ThinkingTokens
from gateway.reasoning_logprobs import ShownLogprobs
from gateway.stream import StopMatcher, detokenizer
from proto import pb

# vLLM's stop_reason for a choice its repetition check ended (finish_reason "repetition"; vllm/v1/core/sched/utils.py).
REPETITION_STOP_REASON = "repetition_detected"

if TYPE_CHECKING:
    from gateway.engine import GenRequest


@dataclass
class TokenLogprob:
    token_id: int
    logprob: float
    top: list = field(default_factory=list)   # [(token_id, logprob)], best first
    rank: Optional[int] = None                # prompt logprobs: vocabulary tokens at least as likely as token_id


@dataclass
class Delta:
    """A piece of one choice's output; `finish_reason` is set on that choice's last Delta."""
    index: int
    content: str = ""
    reasoning: str = ""
    logprobs: list = field(default_factory=list)
    finish_reason: Optional[str] = None
    # vLLM's stop_reason: the stop string that matched, the stop_token_ids id that ended it, "repetition_detected"
    # (finish_reason "repetition"); None for eos / length.
    stop_reason: Optional[Union[str, int]] = None
    # GenRequest.num_prompt_logprobs: TokenLogprob (rank set) of prompt positions 1.., on the choice's first Delta.
    prompt_logprobs: Optional[list] = None
    # The choice's generated tokens up to and including this Delta (continuous usage counts what was sent).
    num_tokens: int = 0
    # The generated ids behind this Delta (vLLM's return_token_ids), the eos / stop token that ended the choice too.
    token_ids: list = field(default_factory=list)
    # Of the choice's generated tokens up to this Delta, those that were thinking (reasoning.ThinkingTokens).
    num_reasoning_tokens: int = 0


class ChoiceOutput:
    """Per-choice text pipeline: ids -> detokenizer -> stop strings -> reasoning split."""

    def __init__(self, index: int, req: "GenRequest", card: ModelCard):
        self.index = index
        self._card = card
        self._want_logprobs = req.num_logprobs is not None
        self._detok = detokenizer(card, req.skip_special_tokens)
        self._stop = StopMatcher(req.stop)
        self._stop_in_reasoning = req.stop_in_reasoning
        self._indent = IndentLimit(req.min_indent)
        self._stop_token_ids = set(req.stop_token_ids)
        self._include_stop = req.include_stop
        self._stop_token_logprob = req.stop_token_logprob
        self._split = ReasoningSplitter(req.thinking_open) if req.split_reasoning else None
        self._thinking = ThinkingTokens(req.thinking_open, card) if req.split_reasoning else None
        # include_reasoning false with logprobs: only the answer's tokens keep theirs.
        hide = req.hide_reasoning and self._split is not None and self._want_logprobs
        self._shown = ShownLogprobs() if hide else None
        self._pending_logprobs: list = []
        self._pending_ids: list = []
        self._pending_prompt: Optional[list] = None
        self._min_tokens = req.sampling.min_tokens if req.min_tokens_hold_stop else 0
        self._num_tokens = 0

    def push(self, message, finish: Optional[str]) -> Optional[Delta]:
        """The Delta of one scheduler message: detokenized text past stop strings, reasoning split off, logprobs; None
        when it adds nothing yet (held text). `finish`: the finish reason, when this message ends the choice."""
        token_ids, entries, stop_entry = self._take_tokens(message, finish)
        if message.HasField("prompt_logprobs"):
            self._pending_prompt = prompt_entries(message.prompt_logprobs)
        self._num_tokens += len(token_ids)
        # As vLLM's detokenizer (vllm/v1/engine/detokenizer.py: stop strings are checked only once
        # len(output_token_ids) > min_tokens), a stop string counts only when it ends in a token after the first
        # min_tokens (one that began before still counts); the eos is likewise allowed only as token min_tokens + 1.
        armed = self._num_tokens > self._min_tokens or not self._min_tokens
        if self._shown is None:
            self._pending_logprobs += entries + ([stop_entry] if stop_entry is not None else [])
            text = self._detok.push(token_ids) + (self._detok.flush() if finish else "")
        else:
            text = self._shown.render(self._detok, token_ids, entries, bool(finish))
        if self._stop_in_reasoning:
            text, finish = self._stopped(text, armed, finish)
            text += self._stop.matched if finish == "stop" and self._include_stop else ""
        reasoning, content = self._split_text(text, bool(finish))
        if self._shown is not None:
            self._pending_logprobs += self._shown.release(self._split.held, len(content), bool(finish), stop_entry)
        if not self._stop_in_reasoning:
            # Stop strings end the answer, never the thinking (vLLM #14170, fixed by its "skip stop in reasoning
            # content"): a stop such as "\n" would otherwise end a reasoning model's turn inside its first thought.
            content, finish = self._stopped(content, armed, finish)
        content = self._indent.push(content)
        if self._indent.hit and self._stop.matched is None:
            finish = "length"   # llama.cpp's n_indent: stop_type "limit"
        if self._stop.matched is not None and self._include_stop and not self._stop_in_reasoning:
            content += self._stop.matched
        if not (reasoning or content or finish or self._pending_prompt is not None):
            return None
        delta = Delta(self.index, content=content, reasoning=reasoning, finish_reason=finish,
                      logprobs=self._pending_logprobs, stop_reason=self._stop_reason(message, finish),
                      prompt_logprobs=self._pending_prompt, token_ids=self._pending_ids,
                      num_reasoning_tokens=self._thinking.count if self._thinking is not None else 0)
        self._pending_logprobs, self._pending_prompt, self._pending_ids = [], None, []
        return delta

    def end(self, finish: str) -> Delta:
        """The last Delta of a choice its scheduler call no longer feeds (a cancel by id: `finish` "abort"): the text
        it holds back (a possible start of a stop string, or reasoning not yet told from the answer) and the ids and
        logprobs behind held text, as vLLM's abort output is made finished, so its detokenizer gives the text it held
        (vllm/v1/engine/output_processor.py abort_requests: make_request_output(finish_reason=ABORT))."""
        delta = self.push(pb.GenerateResponse(stop_token_id=-1), finish)
        delta.finish_reason, delta.stop_reason = finish, None
        return delta

    def _stopped(self, text: str, armed: bool, finish: Optional[str]) -> tuple[str, Optional[str]]:
        """(text up to the first stop string, the finish reason: "stop" once one matched); the text held back as a
        possible start of one is released at the end."""
        text = self._stop.push(text, armed)
        if self._stop.matched is None:
            return text + (self._stop.flush() if finish else ""), finish
        return text, "stop"

    def _take_tokens(self, message, finish: Optional[str]) -> tuple[list, list, Optional[TokenLogprob]]:
        """(the message's ids to render, their logprob entries, the stop token's entry). The eos / stop token that
        ended the choice (not in token_ids) is part of the output as in vLLM: it gets its logprob entry
        (stop_token_logprob), and is rendered only with include_stop (a special token then only shows with
        skip_special_tokens false)."""
        token_ids = list(message.token_ids)
        stop_id = message.stop_token_id if finish == "stop" else -1
        self._pending_ids.extend(token_ids + ([stop_id] if stop_id >= 0 else []))
        if self._thinking is not None:
            self._thinking.push(token_ids + ([stop_id] if stop_id >= 0 else []))
        entries, stop_entry = (_logprobs(message) if self._want_logprobs else []), None
        if self._want_logprobs and stop_id >= 0 and self._stop_token_logprob:
            top = message.stop_token_top_logprobs
            stop_entry = TokenLogprob(stop_id, message.stop_token_logprob, list(zip(top.token_ids, top.logprobs)))
        if stop_id >= 0 and self._include_stop:
            token_ids.append(stop_id)
        return token_ids, entries, stop_entry

    def _stop_reason(self, message, finish: Optional[str]) -> Optional[Union[str, int]]:
        if self._stop.matched is not None:
            return self._stop.matched
        if finish == "repetition":
            return REPETITION_STOP_REASON
        token_id = getattr(message, "stop_token_id", -1)
        return token_id if finish == "stop" and token_id in self._stop_token_ids else None

    def _split_text(self, text: str, final: bool) -> tuple[str, str]:
        if self._split is None:
            return "", text
        reasoning, content = self._split.push(text)
        if final:
            tail_r, tail_c = self._split.flush()
            reasoning, content = reasoning + tail_r, content + tail_c
        return reasoning, content


def prompt_entries(prompt) -> list:
    """pb.PromptLogprobs -> [TokenLogprob] of positions first_position.. (rank and top alternatives set)."""
    tops = [list(zip(t.token_ids, t.logprobs)) for t in prompt.top_logprobs]
    return [TokenLogprob(token_id, logprob, tops[i] if i < len(tops) else [], rank)
            for i, (token_id, logprob, rank) in enumerate(zip(prompt.token_ids, prompt.logprobs, prompt.ranks))]


def _logprobs(message) -> list:
    entries = []
    for i, (token_id, logprob) in enumerate(zip(message.token_ids, message.logprobs)):
        top = []
        if i < len(message.top_logprobs):
            alt = message.top_logprobs[i]
            top = list(zip(alt.token_ids, alt.logprobs))
        entries.append(TokenLogprob(token_id, logprob, top))
    return entries
