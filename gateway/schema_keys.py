"""Gateway process: patternProperties that only an object's named properties match, folded into those properties in
the grammar copy of a schema.

llguidance's rule for a closed object with patternProperties lets a comma follow every member, and the key after it
must match a pattern but name no listed property. Where every key a pattern matches is a listed property (vLLM PR
#30730's schema: properties score and tags, patternProperties {"^score$": ...}, additionalProperties false) no key can
follow that comma: the random tiny model wrote `{"score": 5, "tags": [...], ` and the worker failed the request there
("constrained decoding failed: NoExtensionBias", a 400 after the answer began; vLLM's guidance backend wrote
whitespace forever). JSON Schema applies a property's schema and that of every pattern its name matches (2020-12
10.3.2.1-2), so the copy gives such a property allOf [its schema, the pattern's] and drops the pattern: the same
objects, and no comma where nothing can follow.
"""
from __future__ import annotations

import functools
import json


class _ByteTokens:
    """One token a byte and an end token: a tokenizer for asking llguidance whether a lexeme matches any text."""
    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"<end>"]
    special_token_ids = [256]

    def __call__(self, data: bytes) -> list:
        return list(data)


@functools.lru_cache(maxsize=1)
def _byte_tokenizer():
    import llguidance
    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokens()))


def _top_level_bar(regex: str) -> bool:
    """Whether an alternation `|` stands outside every group and class (`^a|b$`: its anchors bind one side each)."""
    depth, in_class, escaped = 0, False, False
    for char in regex:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "|" and depth == 0:
            return True
    return False


def _key_lexeme(pattern: str):
    """The keys a pattern matches (a search, as JSON Schema reads it) as a Lark regex body, or None where its anchors
    stand anywhere but at its two ends (llguidance's lexemes have none)."""
    from llguidance import regex_to_lark
    starts = pattern.startswith("^")
    ends = pattern.endswith("$") and (len(pattern) - len(pattern[:-1].rstrip("\\")) - 1) % 2 == 0
    inner = pattern[1 if starts else 0:len(pattern) - 1 if ends else len(pattern)]
    if "^" in inner.replace("[^", "") or "$" in inner or ((starts or ends) and _top_level_bar(inner)):
        return None
    body = regex_to_lark(inner, "dw")
    return ("" if starts else "(?s:.*)") + f"(?:{body})" + ("" if ends else "(?s:.*)")


@functools.lru_cache(maxsize=512)
def _matches_nothing(lexeme: str, excluded: tuple) -> bool:
    """Whether no text matches the Lark regex body and is none of the excluded names (False when llguidance cannot
    read it)."""
    import llguidance
    names = " | ".join(json.dumps(name, ensure_ascii=False) for name in excluded)
    grammar = llguidance.LLMatcher.grammar_from_lark(f"start: KEY\nKEY: /{lexeme}/" + (f" & ~({names})" if names else ""))
    if llguidance.LLMatcher.validate_grammar(grammar, _byte_tokenizer()):
        return False
    matcher = llguidance.LLMatcher(_byte_tokenizer(), grammar, log_level=0)
    matcher.compute_bitmask()
    return matcher.is_error()


def fold_covered_patterns(node: dict) -> None:
    """In a closed object's grammar copy (additionalProperties false), each patternProperties pattern that matches only
    listed property names is dropped, its schema added to each of those properties (allOf)."""
    properties, patterns = node.get("properties"), node.get("patternProperties")
    if node.get("additionalProperties", False) is not False or not isinstance(properties, dict) \
            or not isinstance(patterns, dict):
        return
    names = tuple(name for name in properties if isinstance(name, str))
    for pattern, schema in list(patterns.items()):
        lexeme = _key_lexeme(pattern) if isinstance(pattern, str) else None
        if lexeme is None or not _matches_nothing(lexeme, names):
            continue
        del patterns[pattern]
        for name in names:
            # The name matches the pattern: its lexeme less every other name still matches something.
            if schema not in ({}, True, properties[name]) and not _matches_nothing(lexeme, tuple(set(names) - {name})):
                properties[name] = {"allOf": [properties[name], schema]}
    if not patterns:
        del node["patternProperties"]
