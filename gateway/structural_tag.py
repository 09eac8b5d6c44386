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


def is_structural_tag(body: dict) -> bool:
    """Whether the body asks for a structural tag: response_format type structural_tag, or
    structured_outputs.structural_tag."""
    outputs = body.get("structured_outputs")
    return ((body.get("response_format") or {}).get("type") == "structural_tag"
            or (isinstance(outputs, dict) and outputs.get("structural_tag") is not None))


def _structural_tag(body: dict) -> tuple[dict, str]:
    """(the structural tag, the param that names it): response_format's, or structured_outputs.structural_tag, the
    JSON text of one (as vLLM's protocol writes a structural_tag response_format into it)."""
    if (body.get("response_format") or {}).get("type") == "structural_tag":
        return body["response_format"], "response_format"
    param, value = "structured_outputs.structural_tag", body["structured_outputs"]["structural_tag"]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise InvalidRequest(f"{param} is not valid JSON: {exc}", param=param) from exc
    if not isinstance(value, dict):
        raise InvalidRequest(f"{param} must be a structural tag object", param=param)
    return value, param


def structural_tag_constraint(body: dict, card, thinking_open: bool):
    """The grammar of body's structural tag; None when it has none. With thinking open the reasoning comes first (the
    structures apply to the answer, as vLLM's structured output starts at the reasoning end)."""
    if not is_structural_tag(body):
        return None
    fmt, param = _structural_tag(body)
    if fmt.get("format") is not None:
        raise Unsupported(f"{param}.format: xgrammar's structural tag formats are not supported; send the "
                          "structures and triggers form", param=f"{param}.format")
    structures, triggers = fmt.get("structures"), fmt.get("triggers")
    if not isinstance(structures, list) or not structures or not isinstance(triggers, list) or not triggers:
        raise InvalidRequest(f"{param} structural_tag needs non-empty structures and triggers",
                             param=f"{param}.structures" if not structures else f"{param}.triggers")
    tags = [_tag_rules(i, structure, triggers, card, param) for i, structure in enumerate(structures)]
    # As llguidance's StructTag grammars: free text (a trigger written as text ends it lazily), then a structure.
    grammar = "\n".join(["%llguidance {}", f"start: ({' | '.join(f'tag_{i}' for i in range(len(tags)))})* tag_end",
                         "tag_end: TAG_TEXT", "TAG_TEXT: /(.|\\n)*/", *tags]) + "\n"
    return checked(lark_grammar(grammar, param, thinking_open, card), card, param)


def _tag_rules(index: int, structure: dict, triggers: list, card, where: str) -> str:
    """One structure's rules, under the longest trigger its begin starts with (a 400 when none does, as xgrammar
    refuses it). No schema is any JSON value; strings are bounded as in every other JSON grammar here."""
    param = f"{where}.structures[{index}]"
    if not isinstance(structure, dict) or not isinstance(structure.get("begin"), str) or not structure["begin"] \
            or not isinstance(structure.get("end"), str):
        raise InvalidRequest(f"{param} needs a non-empty begin and an end string", param=param)
    if not all(isinstance(t, str) for t in triggers):
        raise InvalidRequest(f"{where}.triggers must be strings", param=f"{where}.triggers")
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
