"""Seeded random JSON schemas (a small generator over the keywords clients send: $ref / $defs, recursion, anyOf /
oneOf / allOf, enum / const of every JSON type, pattern, format, length / item / number bounds, additionalProperties
false / absent / a schema, required subsets, type lists, prefixItems, open values), each walked by a random model through
its grammar: every answer that ends is checked by jsonschema against the schema as sent, an independent validator of
what the grammar copy (gateway.schema_bounds) lets through. The same for forced tool calls, read back by the call
parser. A schema the grammar refuses must be a 400 (InvalidRequest), never another exception."""
import random

import orjson
import pytest
from jsonschema import Draft202012Validator

from gateway.errors import InvalidRequest
from gateway.structured import check_schema, checked, json_constraint
from gateway.tool_grammar import tool_call_grammar
from gateway.tools import parse_tool_calls
from tests.unit.grammar_card import random_answer, random_walk, tiny_card

FORMATS = ["date-time", "date", "time", "uuid", "email", "ipv4", "ipv6", "hostname", "uri", "duration"]
PATTERNS = ["^[a-z]{2,5}$", "^[A-Z][0-9]+$", "abc", "^\\d{3}-\\d{4}$", "^(foo|bar)$", "^[^,]*$", "^\\w+@\\w+$"]
VALUES = [1, 2.5, "a", "b c", True, False, None, 0, -3, "é", [1, 2], {"k": 1}, ""]


def _string(draw: random.Random) -> dict:
    kind = draw.choice(["plain", "format", "pattern"])
    if kind == "format":
        return {"type": "string", "format": draw.choice(FORMATS)}
    node = {"type": "string", "pattern": draw.choice(PATTERNS)} if kind == "pattern" else {"type": "string"}
    if draw.random() < 0.5:
        node["minLength"] = draw.randint(0, 4)
    if draw.random() < 0.5:
        node["maxLength"] = node.get("minLength", 0) + draw.randint(2, 10)
    return node


def _number(draw: random.Random) -> dict:
    node = {"type": draw.choice(["integer", "number"])}
    if draw.random() < 0.5:
        node["minimum"] = draw.choice([-100, 0, 0.25, 7])
    if draw.random() < 0.5:
        node["maximum"] = node.get("minimum", -100) + draw.choice([0.5, 1, 200])
    if draw.random() < 0.2:
        node["exclusiveMinimum" if "minimum" not in node else "exclusiveMaximum"] = draw.choice([0, 1])
    if node["type"] == "integer" and draw.random() < 0.2:
        node["multipleOf"] = draw.choice([2, 3, 5])
    return node


def _scalar(draw: random.Random) -> dict:
    kind = draw.choice(["string", "number", "boolean", "null", "enum", "const", "nullable"])
    if kind == "string":
        return _string(draw)
    if kind == "number":
        return _number(draw)
    if kind in ("boolean", "null"):
        return {"type": kind}
    if kind == "enum":
        return {"enum": draw.sample(VALUES, draw.randint(1, 4))}
    if kind == "const":
        return {"const": draw.choice(VALUES)}
    node = draw.choice([_string, _number])(draw)
    return {**node, "type": [node["type"], "null"]}


def _object(draw: random.Random, depth: int, defs: dict) -> dict:
    names = draw.sample(["a", "b", "c", "d_e", "F", "g h"], draw.randint(0, 4))
    node = {"type": "object", "properties": {name: _node(draw, depth + 1, defs) for name in names}}
    if names and draw.random() < 0.7:
        node["required"] = draw.sample(names, draw.randint(0, len(names)))
    extra = draw.random()
    if extra < 0.4:
        node["additionalProperties"] = False
    elif extra < 0.5:
        node["additionalProperties"] = _node(draw, depth + 1, defs)
    return node


def _node(draw: random.Random, depth: int, defs: dict):
    if depth > 2 or draw.random() < 0.35:
        return _scalar(draw)
    kind = draw.choice(["object", "object", "map", "array", "tuple", "anyOf", "oneOf", "allOf", "ref", "open"])
    if kind == "object":
        return _object(draw, depth, defs)
    if kind == "map":
        return {"type": "object", "additionalProperties": _node(draw, depth + 1, defs), "maxProperties": 3}
    if kind == "array":
        node = {"type": "array", "items": _node(draw, depth + 1, defs)}
        if draw.random() < 0.5:
            node["minItems"] = draw.randint(0, 2)
        node["maxItems"] = node.get("minItems", 0) + draw.randint(0, 3)
        return node
    if kind == "tuple":
        return {"type": "array", "prefixItems": [_node(draw, depth + 1, defs) for _ in range(draw.randint(1, 3))],
                "items": False}
    if kind == "anyOf":
        return {"anyOf": [_node(draw, depth + 1, defs) for _ in range(draw.randint(1, 3))]}
    if kind == "oneOf":
        return {"oneOf": [{"type": kind} for kind in draw.sample(["string", "integer", "boolean", "null"], 2)]}
    if kind == "allOf":
        return {"allOf": [{"type": "object", "properties": {"p": _scalar(draw)}, "required": ["p"]},
                          {"type": "object", "properties": {"q": _scalar(draw)}}]}
    if kind == "ref":
        name = f"D{len(defs)}"
        defs[name] = {}
        defs[name] = _node(draw, depth + 1, defs)
        return {"$ref": f"#/$defs/{name}"}
    return draw.choice([{}, True, {"description": "anything"}])


def random_schema(seed: int) -> dict:
    """A seeded random schema: a recursive tree one time in eight, else a random node with its $defs."""
    draw, defs = random.Random(seed), {}
    if draw.random() < 0.125:
        tree = {"type": "object", "properties": {"v": _scalar(draw), "kids": {
            "type": "array", "items": {"$ref": "#/$defs/T"}, "maxItems": 2}}, "required": ["v"]}
        return {"$defs": {"T": tree}, "$ref": "#/$defs/T"}
    node = _node(draw, 0, defs)
    node = node if isinstance(node, dict) else {"type": "object", "properties": {"x": node}}
    return {**node, "$defs": defs} if defs else node


@pytest.fixture(scope="module")
def card():
    return tiny_card()


def _served(schema: dict, card) -> bool:
    """Whether the schema is served; a refusal must be a 400."""
    try:
        check_schema(schema, "response_format")
        json_constraint(schema, False, card, "response_format")
    except InvalidRequest:
        return False
    return True


@pytest.mark.parametrize("block", range(4))
def test_every_random_answer_validates_against_the_schema_as_sent(card, block):
    checked_answers = 0
    for seed in range(block * 25, block * 25 + 25):
        schema = random_schema(seed)
        if not _served(schema, card):
            continue
        validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        for walk in range(2):
            answer = random_answer(card, schema, seed * 10 + walk, max_tokens=250)
            if answer is None:
                # a long string still open after 250 tokens (strings are capped at 1024 characters)
                continue
            value = orjson.loads(answer)
            errors = [error.message for error in validator.iter_errors(value)]
            assert not errors, (seed, answer, schema, errors)
            checked_answers += 1
    assert checked_answers >= 25


def test_every_forced_call_reads_back_valid_arguments(card):
    checked_calls = 0
    for seed in range(40):
        draw, defs = random.Random(seed), {}
        names = draw.sample(["a", "b", "c", "d"], draw.randint(1, 3))
        params = {"type": "object", "properties": {name: _node(draw, 1, defs) for name in names},
                  "required": draw.sample(names, draw.randint(0, len(names)))}
        if defs:
            params["$defs"] = defs
        tools = [{"type": "function", "function": {"name": "f", "parameters": params}}]
        try:
            grammar = tool_call_grammar(tools, "f", False, card)
            checked(grammar, card, "tools")
        except InvalidRequest:
            continue
        validator = Draft202012Validator(params, format_checker=Draft202012Validator.FORMAT_CHECKER)
        text = random_walk(card, grammar, seed, max_tokens=300)
        if text is None:
            continue
        calls = parse_tool_calls(text, tools, open_end=True)
        assert calls, (seed, text)
        arguments = orjson.loads(calls[0]["function"]["arguments"])
        errors = [error.message for error in validator.iter_errors(arguments)]
        assert not errors, (seed, text, params, errors)
        checked_calls += 1
    assert checked_calls >= 20
