"""Unit tests: a closed object whose patternProperties match only its listed properties (vLLM PR #30730's schema) has
no comma after its last member: llguidance let one through with no key able to follow, and the worker failed the
request there ("constrained decoding failed: NoExtensionBias")."""

import json

import llguidance
import pytest
from jsonschema import Draft202012Validator

from gateway.structured import json_grammar
from tests.unit.grammar_card import accepts, random_answer, tiny_card

# vllm-project/vllm#30730 (tests' sample schema for the guidance backend), with a pattern schema of its own.
SCORE_TAGS = {"type": "object", "properties": {"score": {"type": "integer", "multipleOf": 5},
                                               "tags": {"type": "array", "items": {"type": "string", "maxLength": 4},
                                                        "maxItems": 2}},
              "required": ["score", "tags"], "additionalProperties": False,
              "patternProperties": {"^score$": {"type": "integer", "minimum": 0}}}
EITHER = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
          "patternProperties": {"^(a|b)$": {}}, "required": ["a", "b"]}


def _takes_more(card, schema: dict, prefix: str) -> bool:
    """Whether the grammar takes any text after `prefix` (a comma where no key can follow is a dead end)."""
    grammar = llguidance.LLMatcher.grammar_from_lark(json_grammar(schema, False, card))
    matcher = llguidance.LLMatcher(card.grammar_tokenizer(), grammar, log_level=0)
    assert matcher.consume_tokens(card.encode(prefix)), prefix
    return matcher.validate_tokens(card.encode(", ")) > 0


@pytest.mark.parametrize("schema,done", [(SCORE_TAGS, '{"score": 5, "tags": []'), (EITHER, '{"a": 1, "b": true')],
                         ids=["score-tags", "either-name"])
def test_no_comma_after_the_last_member_when_patterns_match_only_listed_names(schema, done):
    assert not _takes_more(tiny_card(), schema, done)


def test_the_pattern_schema_still_holds_for_the_names_it_matches():
    card = tiny_card()
    assert accepts(card, SCORE_TAGS, '{"score": 5, "tags": ["ab"]}')
    # multipleOf (the property's) and minimum (the pattern's) both apply to score, as JSON Schema applies both.
    assert not accepts(card, SCORE_TAGS, '{"score": 3, "tags": []}')
    assert not accepts(card, SCORE_TAGS, '{"score": -5, "tags": []}')


def test_a_pattern_that_also_matches_other_names_keeps_them():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
              "patternProperties": {"^x_[a-z]$": {"type": "integer"}}}
    card = tiny_card()
    assert accepts(card, schema, '{"a": 1, "x_q": 2}')
    assert _takes_more(card, schema, '{"a": 1')


def test_random_answers_end_valid():
    card, validator = tiny_card(), Draft202012Validator(SCORE_TAGS)
    for seed in range(20):
        answer = random_answer(card, SCORE_TAGS, seed, max_tokens=400)
        assert answer is not None and validator.is_valid(json.loads(answer)), (seed, answer)
