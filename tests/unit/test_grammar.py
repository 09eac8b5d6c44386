"""Unit tests: the worker's constrained decoding (worker/grammar.py) with the tiny checkpoint's tokenizer."""
import os

import pytest
import torch

from proto import pb
from worker.grammar import GrammarBook, start_grammar
from worker.model_card import load_model_card
from worker.sampler import Sampler, SamplingState

TINY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models", "tiny")
YES_NO = 'start: "yes, sir" | "no"'
EOS = (1017, 1015)


@pytest.fixture(scope="module")
def book():
    if not os.path.isfile(os.path.join(TINY, "tokenizer.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    return GrammarBook.from_card(load_model_card(TINY))


def new_request(grammar=YES_NO, kind="lark", outputs=()):
    return pb.NewRequest(req_id="r", sampling=pb.SamplingParams(), prompt_token_ids=[1, 2],
                         output_token_ids=list(outputs), constraint=pb.Constraint(kind=kind, grammar=grammar))


def allowed_ids(book, grammar) -> set:
    return set(book.allowed([grammar])[0].nonzero()[:, 0].tolist())


def test_mask_allows_exactly_the_tokens_that_keep_the_text_in_the_grammar(book):
    grammar = start_grammar(book, new_request())
    allowed = allowed_ids(book, grammar)
    texts = {t: book.tokenizer.decode_str([t]) for t in range(book.vocab_size) if t not in EOS}
    expected = {t for t, text in texts.items() if text and ("yes, sir".startswith(text) or "no".startswith(text))
                and not book.tokenizer.is_special_token(t)}
    assert allowed == expected and expected
    assert not allowed & set(EOS)


def test_completed_grammar_allows_only_eos(book):
    grammar = start_grammar(book, new_request())
    for token_id in book.tokenizer.tokenize_str("no"):
        grammar.consume(token_id)
    assert grammar.is_done and not grammar.error
    assert allowed_ids(book, grammar) == set(EOS)


def test_resume_after_preemption_reaches_the_same_state(book):
    ids = book.tokenizer.tokenize_str("yes, ")
    stepped = start_grammar(book, new_request())
    for token_id in ids:
        stepped.consume(token_id)
    resumed = start_grammar(book, new_request(outputs=ids))
    assert allowed_ids(book, resumed) == allowed_ids(book, stepped)
    assert book.tokenizer.decode_str([min(allowed_ids(book, resumed))]) in ("s", "si", "sir")


@pytest.mark.parametrize("kind, text, message", [
    ("lark", "start: missing_rule", "unknown name"),
    ("json_schema", '{"type": "object", "not": {}}', "not"),
    ("json_schema", "{not json", "invalid json_schema"),
    ("regex", "a+", "unknown constraint kind"),
], ids=["lark-unknown-rule", "schema-unsupported-keyword", "schema-not-json", "unknown-kind"])
def test_bad_grammar_fails_the_request_with_a_message(book, kind, text, message):
    grammar = start_grammar(book, new_request(text, kind))
    assert message in grammar.error
    assert start_grammar(None, new_request()).error == "constrained decoding is not available on this worker"


def test_unconstrained_request_has_no_grammar(book):
    assert start_grammar(book, pb.NewRequest(req_id="r")) is None


def test_sampler_masks_only_constrained_rows_and_stops_at_eos(book):
    sampler = Sampler(book.vocab_size, seed=1, grammars=book)
    schema = '{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], ' \
             '"additionalProperties": false, "x-guidance": {"whitespace_flexible": false}}'
    states = [SamplingState("c", pb.SamplingParams(temperature=1.0), [1], [],
                            start_grammar(book, new_request(schema, "json_schema"))),
              SamplingState("u", pb.SamplingParams(), [1], [])]
    generator = torch.Generator().manual_seed(0)
    for _ in range(40):
        logits = torch.randn(2, book.vocab_size, generator=generator)
        out = sampler.sample(logits, states)
        assert out.token_ids[1] == int(logits[1].argmax())
        states[0].output_token_ids.append(out.token_ids[0])
        if out.token_ids[0] in EOS:
            break
    assert states[0].output_token_ids[-1] in EOS
    text = book.tokenizer.decode_str(states[0].output_token_ids[:-1])
    assert text in ('{"ok":true}', '{"ok":false}')


def test_grammars_are_compiled_once_per_text(book):
    first = start_grammar(book, new_request())
    second = start_grammar(book, new_request())
    assert first.matcher is not second.matcher
    assert book._template("lark", YES_NO) is book._template("lark", YES_NO)


def test_a_grammar_llguidance_gives_up_on_fails_each_request_never_ends_it_as_done(book):
    # llguidance stops lexing (a{1000}){1000} ("too many expressions"); its matcher then allows only eos. The first
    # request met that on a later token; every later one (the grammar cached) ended at once with "stop", empty.
    sampler = Sampler(book.vocab_size, seed=1, grammars=book)
    for _ in range(3):
        grammar = start_grammar(book, new_request("start: /(a{1000}){1000}/"))
        state = SamplingState("c", pb.SamplingParams(), [1], [], grammar)
        for _ in range(4):
            token_id = sampler.sample(torch.zeros(1, book.vocab_size), [state]).token_ids[0]
            if state.grammar.error:
                break
            state.output_token_ids.append(token_id)
        assert state.grammar.error == "constrained decoding failed: lexer error: too many expressions constructed"
        assert not state.grammar.is_done and all(t not in EOS for t in state.output_token_ids)
