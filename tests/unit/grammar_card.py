"""Shared by the structured-output tests: the tiny checkpoint's ModelCard and whether a JSON schema's grammar
accepts a text (llguidance, as the worker enforces it)."""
import os

import llguidance
import pytest

from gateway.model import ModelCard
from gateway.structured import json_grammar
from proto import pb

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(REPO, "models", "tiny")


def tiny_card() -> ModelCard:
    """The tiny model's card (its tokenizer, eos ids 1017 and 1015, vocabulary 1024); skips without `make model`."""
    if not os.path.isfile(os.path.join(TINY, "tokenizer.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    with open(os.path.join(TINY, "tokenizer.json"), "rb") as f:
        tokenizer_json = f.read()
    return ModelCard.from_info(pb.InfoResponse(model_id="tiny", max_context_len=8192, tokenizer_json=tokenizer_json,
                                               eos_token_ids=[1017, 1015], vocab_size=1024))


def accepts(card: ModelCard, schema: dict, text: str) -> bool:
    """Whether the grammar of `schema` (json_grammar, no whitespace freedom) accepts `text` tokenized by `card`."""
    grammar = llguidance.LLMatcher.grammar_from_lark(json_grammar(schema, False, card))
    matcher = llguidance.LLMatcher(card.grammar_tokenizer(), grammar, log_level=0)
    return matcher.consume_tokens(card.encode(text)) and matcher.is_accepting()


def random_answer(card: ModelCard, schema: dict, seed: int, max_tokens: int = 200):
    """One text the grammar of `schema` lets a random model write (random_walk over json_grammar); None when it is
    still open after max_tokens."""
    return random_walk(card, json_grammar(schema, False, card), seed, max_tokens)


def random_walk(card: ModelCard, grammar: str, seed: int, max_tokens: int = 200):
    """One text the Lark `grammar` lets a random model write: each step a uniformly drawn allowed token (an allowed
    end half the time), as the random-weight tiny model samples; None when it is still open after max_tokens."""
    import random
    draw = random.Random(seed)
    matcher = llguidance.LLMatcher(card.grammar_tokenizer(), llguidance.LLMatcher.grammar_from_lark(grammar),
                                   log_level=0)
    token_ids = []
    for _ in range(max_tokens):
        mask = matcher.compute_bitmask()
        allowed = [i for i in range(card.vocab_size) if mask[i // 8] >> (i % 8) & 1]
        ends = [i for i in allowed if i in card.eos_token_ids]
        if ends and (draw.random() < 0.5 or len(ends) == len(allowed)):
            return card.decode(token_ids)
        token_id = draw.choice([i for i in allowed if i not in card.eos_token_ids])
        matcher.consume_token(token_id)
        token_ids.append(token_id)
    return None
