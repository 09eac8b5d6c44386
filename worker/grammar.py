"""Worker process: grammar-constrained decoding (llguidance): one tokenizer, cached grammars, one matcher per request.

A request whose NewRequest carries a Constraint gets a RequestGrammar. Before sampling, every constrained
row's logits are masked in one batched op (tokens the grammar does not allow -> -inf); after sampling the
token is consumed. Once the grammar is complete llguidance allows only the eos ids, so the request ends
with finish_reason "stop" on the next token. A grammar that does not compile, or a token the matcher
refuses, sets RequestGrammar.error: the model runner then fails that request alone (never the step).
"""
from collections import OrderedDict
from typing import Optional

import llguidance
import torch

from proto.grammar_tokenizer import grammar_tokenizer
from worker.batch import to_device

MAX_CACHED_GRAMMARS = 64
MASK = float("-inf")
_BUILDERS = {"json_schema": llguidance.LLMatcher.grammar_from_json_schema,
             "lark": llguidance.LLMatcher.grammar_from_lark}


class GrammarError(Exception):
    """A constraint the worker cannot compile (unknown kind, invalid grammar or schema)."""


class RequestGrammar:
    """One request's llguidance matcher; `error` is non-empty once the grammar failed (it stays failed)."""

    def __init__(self, matcher: Optional[llguidance.LLMatcher], eos_token_ids: frozenset, error: str = ""):
        self.matcher = matcher
        self.eos_token_ids = eos_token_ids
        self.error = error

    @property
    def is_done(self) -> bool:
        """The grammar is complete: only eos may follow. A failed matcher is stopped too, but not done."""
        return self.matcher is not None and self.matcher.is_stopped() and not self.matcher.is_error()

    def check(self) -> None:
        """Sets `error` when the matcher failed on its own (llguidance gives up on a grammar too large to lex, for
        example, while computing a mask; it then allows only eos, which must not end the request as a success)."""
        if not self.error and self.matcher is not None and self.matcher.is_error():
            self._fail()

    def consume(self, token_id: int) -> None:
        """Advances the matcher by one sampled token; a token the grammar refuses sets `error`. After a failure, or an
        eos once the grammar is done (ignore_eos), nothing is checked."""
        if self.error:
            return
        if self.is_done and token_id in self.eos_token_ids:
            # ignore_eos requests keep sampling eos after the grammar ended; nothing left to check.
            return
        if not self.matcher.consume_token(token_id):
            self._fail()

    def _fail(self) -> None:
        # llguidance appends a dump of its state after the reason; the client gets the reason.
        self.error = f"constrained decoding failed: {self.matcher.get_error().split(chr(10))[0]}"

    def consume_all(self, token_ids: list) -> None:
        """consume() for each token id in order."""
        for token_id in token_ids:
            self.consume(token_id)


class GrammarBook:
    """Per worker process: the llguidance tokenizer (built on first use) and compiled grammars by text."""

    def __init__(self, tokenizer_json, vocab_size: int, eos_token_ids: list):
        self._tokenizer_json = tokenizer_json
        self.vocab_size = vocab_size
        self.eos_token_ids = list(eos_token_ids)
        self._tokenizer: Optional[llguidance.LLTokenizer] = None
        self._executor: Optional[llguidance.LLExecutor] = None
        self._compiled: OrderedDict = OrderedDict()   # (kind, text) -> fresh LLMatcher

    @classmethod
    def from_card(cls, card: dict) -> "GrammarBook":
        """From worker.model_card.load_model_card(): tokenizer.json, LM head size, eos ids."""
        return cls(card["tokenizer_json"], card["vocab_size"], card["eos_token_ids"])

    @property
    def tokenizer(self) -> llguidance.LLTokenizer:
        """llguidance's tokenizer from tokenizer.json, built on first use: the LM head's vocabulary size (masks cover
        its padded rows), or the tokenizer's own where the tokenizer is larger; forced text is tokenized without the
        added tokens (proto/grammar_tokenizer.py)."""
        if self._tokenizer is None:
            text = self._tokenizer_json
            text = text.decode("utf-8") if isinstance(text, bytes) else text
            try:
                # Masks cover the LM head's rows; padded rows beyond the tokenizer are never allowed.
                self._tokenizer = grammar_tokenizer(text, self.eos_token_ids, n_vocab=self.vocab_size)
            except ValueError:
                # A tokenizer larger than the LM head: masks keep its size and are cut to the head.
                self._tokenizer = grammar_tokenizer(text, self.eos_token_ids)
        return self._tokenizer

    @property
    def executor(self) -> llguidance.LLExecutor:
        """llguidance's LLExecutor (its thread pool for batch masks), made on first use."""
        if self._executor is None:
            self._executor = llguidance.LLExecutor()
        return self._executor

    def start(self, constraint, output_token_ids: list) -> Optional[RequestGrammar]:
        """The request's grammar (None when unconstrained), advanced over tokens generated before a preemption."""
        if constraint is None or not constraint.kind:
            return None
        eos = frozenset(self.eos_token_ids)
        try:
            matcher = self._template(constraint.kind, constraint.grammar).deep_copy()
        except GrammarError as exc:
            return RequestGrammar(None, eos, error=str(exc))
        grammar = RequestGrammar(matcher, eos)
        grammar.consume_all(output_token_ids)
        return grammar

    def _template(self, kind: str, text: str) -> llguidance.LLMatcher:
        key = (kind, text)
        matcher = self._compiled.get(key)
        if matcher is not None:
            self._compiled.move_to_end(key)
            return matcher
        matcher = self._compile(kind, text)
        self._compiled[key] = matcher
        if len(self._compiled) > MAX_CACHED_GRAMMARS:
            self._compiled.popitem(last=False)
        return matcher

    def _compile(self, kind: str, text: str) -> llguidance.LLMatcher:
        build = _BUILDERS.get(kind)
        if build is None:
            raise GrammarError(f"unknown constraint kind {kind!r} (expected one of {sorted(_BUILDERS)})")
        try:
            grammar = build(text)
        except ValueError as exc:
            raise GrammarError(f"invalid {kind} constraint: {exc}") from exc
        matcher = llguidance.LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise GrammarError(f"invalid {kind} constraint: {matcher.get_error()}")
        return matcher

    def allowed(self, grammars: list) -> torch.Tensor:
        """Bool [R, vocab_size]: the tokens each grammar allows next (one batched llguidance call)."""
        words = (self.tokenizer.vocab_size + 31) // 32
        bitmask = torch.zeros(len(grammars), words, dtype=torch.int32)
        self.executor.unsafe_compute_mask_ptr([(g.matcher, r) for r, g in enumerate(grammars)],
                                              bitmask.data_ptr(), words * 4, len(grammars))
        bits = (bitmask.unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1
        allowed = bits.reshape(len(grammars), words * 32).bool()
        if allowed.shape[1] < self.vocab_size:
            allowed = torch.nn.functional.pad(allowed, (0, self.vocab_size - allowed.shape[1]))
        return allowed[:, :self.vocab_size]


def start_grammar(book: Optional[GrammarBook], new_request) -> Optional[RequestGrammar]:
    """The grammar of a pb.NewRequest (None when unconstrained); a failed one when this worker has no book."""
    if not new_request.HasField("constraint"):
        return None
    if book is None:
        return RequestGrammar(None, frozenset(), error="constrained decoding is not available on this worker")
    return book.start(new_request.constraint, list(new_request.output_token_ids))


def apply_grammars(book: GrammarBook, logits: torch.Tensor, states: list) -> list:
    """In place on logits [M, V]: masks every constrained row; returns [(row, RequestGrammar)] that were masked."""
    rows = [(r, st.grammar) for r, st in enumerate(states) if st.grammar is not None and not st.grammar.error]
    if not rows:
        return rows
    index = to_device([r for r, _ in rows], logits.device, torch.int64)
    allowed = to_device(book.allowed([g for _, g in rows])[:, :logits.shape[1]], logits.device)
    logits[index] = logits[index].masked_fill(~allowed, MASK)
    for _, grammar in rows:
        grammar.check()
    return rows


def consume_sampled(rows: list, token_ids: list) -> None:
    """After sampling: each masked row's matcher consumes the token its row sampled."""
    for r, grammar in rows:
        grammar.consume(token_ids[r])
