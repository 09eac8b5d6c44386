"""Gateway process: vLLM's response_format {"type": "structural_tag", "structures": [...], "triggers": [...]} as an
llguidance grammar: free text, in which each trigger may only open one of its structures (begin, JSON valid for the
structure's schema, end), as xgrammar's structural tags read it (vLLM's LegacyStructuralTagResponseFormat)."""
from __future__ import annotations

import json
import re

from gateway.errors import InvalidRequest, Unsupported
from gateway.openai_fields import lark_grammar
from gateway.schema_bounds import bounded_schema
from gateway.structured import check_schema, checked, max_string_chars

_PARAM = "response_format"


def is_structural_tag(body: dict) -> bool:
    return (body.get("response_format") or {}).get("type") == "structural_tag"


def structural_tag_constraint(body: dict, card, thinking_open: bool):
    """The grammar of body's structural_tag response_format; None when it has none. With thinking open the reasoning
    comes first (the structures apply to the answer, as vLLM's structured output starts at the reasoning end)."""
    if not is_structural_tag(body):
        return None
    fmt = body["response_format"]
    if fmt.get("format") is not None:
        raise Unsupported("response_format.format: xgrammar's structural tag formats are not supported; send the "
                          "structures and triggers form", param="response_format.format")
    structures, triggers = fmt.get("structures"), fmt.get("triggers")
    if not structures or not triggers:
        raise InvalidRequest("response_format structural_tag needs non-empty structures and triggers",
                             param="response_format.structures" if not structures else "response_format.triggers")
    tags = [_tag_rules(i, structure, triggers, card) for i, structure in enumerate(structures)]
    # As llguidance's StructTag grammars: free text (a trigger written as text ends it lazily), then a structure.
    grammar = "\n".join(["%llguidance {}", f"start: ({' | '.join(f'tag_{i}' for i in range(len(tags)))})* tag_end",
                         "tag_end: TAG_TEXT", "TAG_TEXT: /(.|\\n)*/", *tags]) + "\n"
    return checked(lark_grammar(grammar, _PARAM, thinking_open, card), card, _PARAM)


def _tag_rules(index: int, structure: dict, triggers: list, card) -> str:
    """One structure's rules, under the longest trigger its begin starts with (a 400 when none does, as xgrammar
    refuses it). No schema is any JSON value; strings are bounded as in every other JSON grammar here."""
    param = f"response_format.structures[{index}]"
    begin = structure["begin"]
    trigger = max((t for t in triggers if t and begin.startswith(t)), key=len, default=None)
    if trigger is None:
        raise InvalidRequest(f"{param}.begin {json.dumps(begin)} starts with none of the triggers",
                             param=f"{param}.begin")
    schema = {} if structure.get("schema") is None else check_schema(structure["schema"], f"{param}.schema")
    body = " ".join(filter(None, [_literal(begin[len(trigger):], card),
                                  "%json " + json.dumps(bounded_schema(schema, max_string_chars())),
                                  _literal(structure["end"], card)]))
    if card.is_added_token(trigger):
        return f"tag_{index}: TAG_TEXT {trigger} {body}"
    return f"tag_{index}_trig[lazy]: TAG_TEXT {json.dumps(trigger)}\ntag_{index}: tag_{index}_trig {body}"


def _literal(text: str, card) -> str:
    """Lark items for text, its added tokens (a </tool_call> in an end) named as the tokens they are."""
    added = sorted((t for t in card.added_token_texts if t in text), key=len, reverse=True)
    if not added:
        return json.dumps(text) if text else ""
    parts = re.split("(" + "|".join(map(re.escape, added)) + ")", text)
    return " ".join(part if part in added else json.dumps(part) for part in parts if part)
