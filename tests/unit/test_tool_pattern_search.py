"""A string tool parameter's `pattern` in a forced call is read as JSON Schema reads it, a search (ECMA-262): "^x"
starts with x, "ab$" ends with ab, "x" holds an x. Only patterns anchored at both ends were enforced; any other was
free text, so a forced call wrote {"code": "앚г"} for {"pattern": "^x"}, an argument its own schema refuses."""
import re

import pytest

from gateway.pattern_regex import whole_text_regex
from gateway.tool_grammar import tool_call_grammar
from tests.unit.test_grammar_tools import accepts, card  # noqa: F401  (card is a fixture)

TEXTS = ["x", "ax", "xa", "ab", "zab", "b", "ba", "$x", "x$", "a|b", "", "a\nb", "]"]


@pytest.mark.parametrize("pattern", ["^x", "x", "ab$", "^a|b$", "^(a|b)+$", "\\$x", "x\\$", "[$^]x", "[]a]|b",
                                     "^a\\|b$", "^$", "a(b|c)"])
def test_the_whole_text_regex_matches_what_the_pattern_finds(pattern):
    whole = whole_text_regex(pattern)
    assert [bool(re.fullmatch(whole, t, re.S)) for t in TEXTS] == [bool(re.search(pattern, t)) for t in TEXTS]


@pytest.mark.parametrize("pattern", ["a^b", "(^a)", "a$b"])
def test_an_anchor_inside_is_left_to_the_free_text(pattern):
    assert whole_text_regex(pattern) is None


def _tool(pattern: str) -> dict:
    return {"type": "function", "function": {"name": "code", "parameters": {
        "type": "object", "properties": {"c": {"type": "string", "pattern": pattern, "maxLength": 6}},
        "required": ["c"]}}}


def _call(value: str) -> str:
    return f"<tool_call>\n<function=code>\n<parameter=c>\n{value}\n</parameter>\n</function>\n</tool_call>"


@pytest.mark.parametrize("pattern, ok, refused", [
    ("^x", ["x", "xyz", "x<b"], ["ax", "yx"]),
    ("ab$", ["ab", "zzab"], ["abz", "a"]),
    ("x", ["x", "axb", "zzx"], ["abc", ""]),
    ("^a|b$", ["a", "azz", "zzb"], ["zaz", "ba "]),
], ids=["starts", "ends", "holds", "either-end"])
def test_a_forced_call_writes_only_what_the_pattern_finds(card, pattern, ok, refused):
    grammar = tool_call_grammar([_tool(pattern)], None, False, card)
    assert [accepts(card, grammar, _call(value)) for value in ok] == [True] * len(ok)
    assert [accepts(card, grammar, _call(value)) for value in refused] == [False] * len(refused)


def test_an_open_side_never_holds_the_closing_tag(card):
    grammar = tool_call_grammar([_tool("^x")], None, False, card)
    assert not accepts(card, grammar, _call("x</parameter>\n<parameter=c>\nx"))
