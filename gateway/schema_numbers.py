"""Gateway process: the numbers of a JSON schema's grammar copy (gateway.schema_bounds), bounded so that each is a
finite double and a model that rambles digits still ends.

A number without bounds is an integer of at most 18 digits or a decimal within 1e15, never with an exponent; an
integer or number open on a side ends at 18 digits there; a number is written in at most 10 fraction digits where the
schema sets no step of its own. Every value the bounded copy allows still validates against the original.
"""
from __future__ import annotations

import copy
import decimal

# The JSON Schema keywords that bound a number (structured.py reads them too).
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# The widest integer the grammar writes on a side the schema leaves open: 18 digits, which a signed 64-bit integer
# holds (Go's int, Java's long; the forced-call grammar's plain integers are as wide). llguidance's rule took any
# number of digits: the random tiny model answered {"a": integer} with 59 of them (no int64 reads it, and a model that
# rambles digits never ends); llama.cpp's json-schema-to-grammar, Ollama's format grammar, stops at 16
# (PRIMITIVE_RULES integral-part "[0] | [1-9] [0-9]{0,15}").
_MAX_OPEN_INTEGER = 10**18 - 1
# A bound this far out on its own side says "any 64-bit value" (Java's and Go's int64 limits, .NET's double.MaxValue
# of [Range(double.MinValue, double.MaxValue)]), and llguidance builds no range from it: {"type": "number", "maximum":
# 1e308} was a 400 "Failed to generate regex for float range: min=None, max=Some(1e308)", an integer minimum of -2^63
# "... integer range". Such a side is read as open (it ends at 18 digits), every value written still within the bound.
_FAR = 2**63 - 1
# The finest step a number is written in where the schema sets none: 10 fraction digits, the finest multipleOf
# llguidance compiles. Its number rule took any number of them: the random tiny model answered {"type": "number",
# "minimum": 0} with 652.798226131164917914536544310476131532054790071731534614 (a model that rambles digits never
# ends); llama.cpp's json-schema-to-grammar stops at 16 (PRIMITIVE_RULES decimal-part "[0-9]{1,16}").
_NUMBER_STEP = 1e-10
# A number without bounds, as the grammar writes it: such an integer, or a decimal within +-1e15 (no exponent).
_NUMBER_CONSTRAINTS = BOUNDS + ("multipleOf", "enum", "const", "anyOf", "oneOf", "allOf", "not")
_FINITE_NUMBER = [{"type": "integer", "minimum": -_MAX_OPEN_INTEGER, "maximum": _MAX_OPEN_INTEGER},
                  {"type": "number", "minimum": -1e15, "maximum": 1e15}]


def number_bound(node: dict, key: str):
    """node[key] where it is a JSON number (a bool is none), else None."""
    value = node.get(key)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def close_exclusive_bounds(node: dict) -> None:
    """llguidance's number rule for exclusiveMinimum L (a whole number) and an upper bound below L + 1, a range with no
    integer in it, lets "L" itself through ({"exclusiveMinimum": 0, "exclusiveMaximum": 0.001} answered 0 for every
    seed of the random model), and so for a negative whole exclusiveMaximum H above a lower bound past H - 1
    ({"minimum": -2.5, "exclusiveMaximum": -2} took -2). An inclusive bound 1e-9 inside it keeps the grammar off L
    (values within 1e-9 of it are left out, every one allowed stays valid); one too large for the step is left."""
    if node.get("type", "number") != "number":
        # A node with no type bounds its numbers too ({"exclusiveMinimum": 0, "maximum": 0.5} also took 0).
        return
    for edge, inner, others, sign in (("exclusiveMinimum", "minimum", ("maximum", "exclusiveMaximum"), 1),
                                       ("exclusiveMaximum", "maximum", ("minimum", "exclusiveMinimum"), -1)):
        bound = number_bound(node, edge)
        far = [value for value in (number_bound(node, key) for key in others) if value is not None]
        if bound is None or bound != int(bound) or not far:
            continue
        step, nearest, own = bound + sign * 1e-9, (min(far) if sign > 0 else max(far)), number_bound(node, inner)
        if sign * (nearest - bound) < 1 and step != bound and (own is None or sign * (step - own) > 0):
            node[inner] = step


def _cap_fraction_digits(node: dict) -> None:
    """A number node without its own step gets _NUMBER_STEP, unless a bound of it is finer (llguidance refuses the
    pair, or finds no multiple between bounds 1e-11 and 2e-11): then it stays as sent."""
    if node.get("type") != "number" or any(key in node for key in ("multipleOf", "enum", "const")):
        return
    bounds = [bound for key in BOUNDS if (bound := number_bound(node, key)) is not None]
    if all(decimal.Decimal(repr(bound)).as_tuple().exponent >= -10 for bound in bounds):
        node["multipleOf"] = _NUMBER_STEP


def far_sides(node: dict) -> list:
    """The bound keys of an integer or number node (a type list of them, beside null, too) that its grammar copy reads
    as open: a bound at or past _FAR on its own side (a maximum of 1e308 or 2^64 - 1, a minimum of -2^63), that side
    then ending at 18 digits, every value written within the bound sent. Where the other side's bound passes that cap
    (minimum 2^62, maximum 2^63 - 1) the side would stay open, past the bound sent, and llguidance builds no integer
    range open there: the bound is kept as sent (llguidance compiles that range). None where enum / const decide."""
    kinds = [kind for kind in (node.get("type") if isinstance(node.get("type"), list) else [node.get("type")])
             if kind != "null"]
    if not kinds or any(kind not in ("integer", "number") for kind in kinds) or "enum" in node or "const" in node:
        return []
    sides = ((("minimum", "exclusiveMinimum"), -1), (("maximum", "exclusiveMaximum"), 1))
    near = {sign: [bound for key in keys if (bound := number_bound(node, key)) is not None] for keys, sign in sides}
    return [key for keys, sign in sides if not any(sign * bound >= _MAX_OPEN_INTEGER for bound in near[-sign])
            for key in keys if (bound := number_bound(node, key)) is not None and sign * bound >= _FAR]


def _cap_open_sides(node: dict) -> None:
    """An integer or number node's open side(s) end at _MAX_OPEN_INTEGER; a side the schema bounds is kept (but one
    bounded past _FAR, read as open), and so is an open side whose cap the other bound passes (minimum 10^18: that side
    stays open)."""
    if node.get("type") not in ("integer", "number") or "enum" in node or "const" in node:
        return
    for key in far_sides(node):
        del node[key]
    lower = [bound for key in ("minimum", "exclusiveMinimum") if (bound := number_bound(node, key)) is not None]
    upper = [bound for key in ("maximum", "exclusiveMaximum") if (bound := number_bound(node, key)) is not None]
    if not upper and (not lower or max(lower) < _MAX_OPEN_INTEGER):
        node["maximum"] = _MAX_OPEN_INTEGER
    if not lower and (not upper or min(upper) > -_MAX_OPEN_INTEGER):
        node["minimum"] = -_MAX_OPEN_INTEGER


def bound_number(node: dict) -> None:
    """node (after close_exclusive_bounds), its numbers bounded as this module's docstring says."""
    if node.get("type") == "number" and not any(key in node for key in _NUMBER_CONSTRAINTS):
        # llguidance's JSON number takes any exponent: 8e691 or -7e54135022643151, which no double holds, so a
        # forced call's {"type": "number"} argument was read back as the string "8e691" (its schema refused).
        del node["type"]
        node["anyOf"] = copy.deepcopy(_FINITE_NUMBER)
    _cap_open_sides(node)
    _cap_fraction_digits(node)
