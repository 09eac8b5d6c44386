"""A forced call's string parameter with a format llguidance enforces (date-time, email, uuid, ...) follows it.

The raw-text rule of a string parameter ignored `format`: tool_choice "required" for book(when: date-time) let the
model write any text (up to SPARKINFER_GRAMMAR_MAX_STRING characters: the tiny model ran to max_tokens, no call), so
the arguments broke the schema. Now such a value is its JSON string, enforced, and read back as its text."""
import json

import llguidance
import pytest

from gateway.tool_grammar import tool_call_grammar
from gateway.tools import parse_tool_calls
from tests.unit.test_grammar_tools import card  # noqa: F401  (a fixture)

PARAMS = {"type": "object", "required": ["when", "who"],
          "properties": {"when": {"type": "string", "format": "date-time"},
                         "who": {"type": "string", "format": "email"},
                         "note": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": "book", "parameters": PARAMS}}]


def _call(when: str, who: str) -> str:
    return (f"<tool_call>\n<function=book>\n<parameter=when>\n{when}\n</parameter>\n<parameter=who>\n{who}\n"
            f"</parameter>\n</function>\n</tool_call>")


def _accepts(card, text: str) -> bool:
    grammar = llguidance.LLMatcher.grammar_from_lark(tool_call_grammar(TOOLS, None, False, card))
    matcher = llguidance.LLMatcher(card.grammar_tokenizer(), grammar, log_level=0)
    return matcher.consume_tokens(card.encode(text)) and matcher.is_accepting()


def test_the_grammar_enforces_the_formats(card):
    assert _accepts(card, _call('"2026-01-02T03:04:05Z"', '"a@b.io"'))
    assert not _accepts(card, _call('"tomorrow"', '"a@b.io"'))
    assert not _accepts(card, _call('"2026-01-02T03:04:05Z"', '"nobody"'))


@pytest.mark.parametrize("when", ['"2026-01-02T03:04:05Z"', "2026-01-02T03:04:05Z"], ids=["forced", "free"])
def test_the_value_reads_back_as_its_text(when):
    arguments = parse_tool_calls(_call(when, '"a@b.io"'), TOOLS)[0]["function"]["arguments"]
    assert json.loads(arguments) == {"when": "2026-01-02T03:04:05Z", "who": "a@b.io"}


def test_a_plain_string_keeps_its_quotes():
    text = '<tool_call>\n<function=book>\n<parameter=note>\n"quoted"\n</parameter>\n</function>\n</tool_call>'
    assert json.loads(parse_tool_calls(text, TOOLS)[0]["function"]["arguments"]) == {"note": '"quoted"'}
