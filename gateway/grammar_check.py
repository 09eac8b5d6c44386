"""Gateway process: whether llguidance can enforce a grammar for the served tokenizer at all, checked before the
request starts (gateway.structured.checked), so what it cannot is a 400 naming the problem, not a failure after the
answer began."""
from __future__ import annotations

import functools

from gateway.schema_errors import schema_compile_reason


def grammar_error(grammar: str, card) -> str:
    """Why llguidance cannot enforce the Lark text for the card's tokenizer, or "": it does not compile, or it allows
    no output where the answer starts (_first_step_error)."""
    return _grammar_error(card.grammar_tokenizer(), grammar, _think_end(card))


@functools.lru_cache(maxsize=256)
def _grammar_error(tokenizer, grammar: str, think_end: tuple) -> str:
    import llguidance
    compiled = llguidance.LLMatcher.grammar_from_lark(grammar)
    error = llguidance.LLMatcher.validate_grammar(compiled, tokenizer)
    if error and not error.startswith("WARNING"):
        return schema_compile_reason(error.strip())
    return _first_step_error(llguidance.LLMatcher(tokenizer, compiled, log_level=0), think_end)


# Forced runs followed by _first_step_error (each run the text up to the grammar's next choice).
_MAX_FORCED_STEPS = 64


def _first_step_error(matcher, think_end: tuple) -> str:
    """Why no output can start, or "". A grammar can compile and still allow nothing ({"$ref": "#"}: llguidance
    finds no first token); the worker would fail it after the request began. The first mask, and the one after
    </think> where reasoning comes first, show it here."""
    matcher.compute_bitmask()
    if think_end and not matcher.is_error() and matcher.validate_tokens(list(think_end)) == len(think_end):
        matcher.consume_tokens(list(think_end))
        matcher.compute_bitmask()
    # Then the text the grammar forces (the `{"x": ` of a required property): a $ref cycle with no base case, such as
    # {"properties": {"x": {"$ref": "#/properties/x"}}, "required": ["x"]}, dies only there, after the answer began
    # (vllm-project/vllm#57725: vLLM's 500 mid-generation).
    for _ in range(_MAX_FORCED_STEPS):
        forced = [] if matcher.is_error() or matcher.is_stopped() else matcher.compute_ff_tokens()
        if not forced:
            break
        matcher.consume_tokens(forced)
        matcher.compute_bitmask()
    if not matcher.is_error():
        return ""
    return f"the grammar allows no output ({matcher.get_error().splitlines()[0]})"


def _think_end(card) -> tuple:
    if card.is_added_token("</think>"):
        return (card.token_id("</think>"),)
    return tuple(card.encode("</think>"))
