"""Gateway process: the grammar copy of a JSON schema, bounded so that a model that rambles still ends.

Every output a bounded copy allows still validates against the original schema. Strings without
maxLength/enum/const (of no format, or an open one: email, hostname, uri; a pattern some string that short matches)
get maxLength `limit`
(SPARKINFER_GRAMMAR_MAX_STRING; their minLength when larger), so do the keys of a map (`additionalProperties`
alone); objects with `properties` but no `additionalProperties` get no other keys. Numbers are finite doubles of at
most 18 integer and 10 fraction digits where the schema leaves that open (gateway.schema_numbers). A type list
(`["number", "null"]`, as OpenAI's strict mode writes an optional field) is read as the anyOf of its types, so each
is bounded as it would be alone (a type list was left unbounded: its numbers took any exponent, 945E+3023822713,
read back as a string its schema refused, and its strings any length).
A value the schema leaves open (no type, `true`, a bare object's members or array's items) is the bounded any-value
of json_object (gateway.schema_open).
"""
from __future__ import annotations

import copy
import functools
import json
from typing import Any

from gateway.schema_dates import pin_date_format
from gateway.schema_keys import fold_covered_patterns
from gateway.schema_numbers import bound_number, close_exclusive_bounds
from gateway.schema_open import ANNOTATIONS as _NODE_KEYS, any_value_defs, close_open_values, key_pattern

_JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_UNBOUNDED_STRING = ("maxLength", "enum", "const")
# Keywords that decide a value's type themselves: a node holding one gets no inferred type (_infer_type).
_DECIDED = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "not", "if")
# The formats llama.cpp's json-schema-to-grammar reads as a string's where no type is given (its uuid and
# STRING_FORMAT_RULES).
_STRING_FORMATS = ("date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5")
# The subschemas whose narrowing narrows the schema (not `not` nor `if`).
_NARROWABLE = ("items", "additionalProperties", "then", "else", "contains")
# Formats whose values have no length of their own (llguidance's rules took a 1,000-token email, hostname or uri, never
# ending): capped like a plain string (as is one with no format). The others are short (uuid, ipv4, ipv6) or pinned
# by a pattern (schema_dates).
_OPEN_FORMATS = ("email", "hostname", "uri")
# RFC 1123's longest host name (jsonschema's hostname check, fqdn, refuses a longer one): llguidance caps each label
# at 63 characters but not the name.
_HOSTNAME_CHARS = 253


@functools.lru_cache(maxsize=64)
def enforced_format(name: str) -> bool:
    """Whether llguidance has a rule for this string format (date-time, email, uuid, uri, ...)."""
    import llguidance
    grammar = llguidance.LLMatcher.grammar_from_lark("start: %json" + json.dumps({"type": "string", "format": name}))
    return not llguidance.LLMatcher.validate_grammar(grammar)


def formatted_string(schema: Any) -> bool:
    """A string schema whose format llguidance enforces (and no enum / const, which are literals)."""
    return (isinstance(schema, dict) and schema.get("type") in ("string", ["string"])
            and isinstance(schema.get("format"), str) and enforced_format(schema["format"])
            and "enum" not in schema and "const" not in schema)


def _split_types(node: dict) -> None:
    """A type list as the anyOf of one copy of the node per type (the node's own keys stay on it)."""
    types = node["type"]
    if len(types) == 1:
        node["type"] = types[0]
        return
    if "anyOf" in node or not types:
        return
    rest = {key: value for key, value in node.items() if key not in _NODE_KEYS and key != "type"}
    for key in rest:
        del node[key]
    del node["type"]
    node["anyOf"] = [{**copy.deepcopy(rest), "type": kind} for kind in types]


@functools.lru_cache(maxsize=256)
def _pattern_fits(pattern: Any, string_format: Any, max_length: int) -> bool:
    """Whether a string of at most max_length characters (of the format, if any) can match the pattern (none given:
    True). A pattern leaves the length open ("abc", a search, or ^[a-z]+$: the random tiny model wrote such a string
    until max_tokens), so it is capped too, unless llguidance finds no short enough match (^a{2000}$) or cannot tell
    (an email with a pattern): then it stays as sent."""
    if not isinstance(pattern, str):
        return pattern is None
    import llguidance
    schema = {"type": "string", "pattern": pattern, "maxLength": max_length}
    if isinstance(string_format, str):
        schema["format"] = string_format
    return not llguidance.LLMatcher.validate_grammar(llguidance.LLMatcher.grammar_from_lark("start: %json" + json.dumps(schema)))


def _bound_scalars(node: dict, limit: int) -> None:
    close_exclusive_bounds(node)
    if isinstance(node.get("format"), str) and not enforced_format(node["format"]):
        # JSON Schema leaves a format it does not know unchecked (pydantic's binary, password, path; OpenAPI's
        # int32, byte): llguidance refused the whole schema for one. The grammar copy drops it.
        del node["format"]
    pin_date_format(node)
    cap = max(limit, _min_length(node))
    if (node.get("type") == "string" and limit and not any(key in node for key in _UNBOUNDED_STRING)
            and node.get("format", _OPEN_FORMATS[0]) in _OPEN_FORMATS
            and _pattern_fits(node.get("pattern"), node.get("format"), cap)):
        # Never below the schema's own minLength: the cap stops a rambling model, it must not refuse the schema.
        node["maxLength"] = cap
    if node.get("format") == "hostname":
        node["maxLength"] = min(node.get("maxLength", _HOSTNAME_CHARS), _HOSTNAME_CHARS)
    bound_number(node)


def _bound(node: Any, limit: int) -> None:
    if not isinstance(node, dict):
        return
    if isinstance(node.get("type"), list):
        _split_types(node)
    _bound_scalars(node, limit)
    fold_covered_patterns(node)
    if "properties" in node and "additionalProperties" not in node:
        node["additionalProperties"] = False
        _keep_required(node)
    extra = node.get("additionalProperties")
    if limit and isinstance(extra, dict) and "properties" not in node and "patternProperties" not in node:
        # A map ({"additionalProperties": {...}} alone, pydantic's dict[str, X]): its keys are strings to cap too.
        node["patternProperties"] = {key_pattern(limit): extra}
        node["additionalProperties"] = False
    for key in _SCHEMA_LISTS:
        for child in node.get(key) or []:
            _bound(child, limit)
    for key in _SCHEMA_MAPS:
        for child in (node.get(key) or {}).values():
            _bound(child, limit)
    for key in _SCHEMA_ONE:
        _bound(node.get(key), limit)


def _widen(node: Any, root: dict) -> None:
    """Before objects are closed: the keys one part of a composition lists are keys its other parts must let through.
    An allOf branch and the object beside it (or around an anyOf / oneOf of objects) each list only their own
    properties, and closing each to its own made every schema that splits an object's keys across them unsatisfiable
    (allOf [{a, required}, {b, required}], a $ref'd base plus its extension, in allOf or beside the $ref, a
    discriminator beside anyOf branches):
    a 400 where JSON Schema, and vLLM's grammar backends, take them. Each open part now also lists the others' names
    with any value ({}), which the part that owns a name still constrains; every output stays valid for the original,
    whose parts let any other key through."""
    if not isinstance(node, dict):
        return
    own = _names(node)
    for key in ("allOf", "anyOf", "oneOf", "$ref"):
        branches = [_target(branch, root) for branch in _parts(node, key) if isinstance(branch, dict)]
        names = [_names(branch) for branch in branches]
        _add_names(node, [name for group in names for name in group])
        for branch, group in zip(branches, names):
            # allOf: all branches hold at once, so each lets the others' keys through; anyOf / oneOf: one branch holds
            # beside the object around it (letting a sibling's keys through could make an output match two oneOf arms).
            siblings = [name for other in names for name in other] if key in ("allOf", "$ref") else []
            _add_names(branch, own + siblings)
    for child in _children(node):
        _widen(child, root)


def _parts(node: dict, key: str) -> list:
    """The parts a composition keyword holds; a $ref beside properties (draft 2020-12) holds with them, as one more
    allOf branch would."""
    if key != "$ref":
        parts = node.get(key)
        return parts if isinstance(parts, list) else []
    return [{"$ref": node["$ref"]}] if isinstance(node.get("$ref"), str) and _names(node) else []


def _names(node: Any) -> list:
    properties = node.get("properties") if isinstance(node, dict) else None
    return list(properties) if isinstance(properties, dict) else []


def _add_names(node: Any, names: list) -> None:
    """names, with any value, into an object schema's properties, unless the schema closed itself."""
    if isinstance(node, dict) and isinstance(node.get("properties"), dict) and "additionalProperties" not in node:
        for name in names:
            node["properties"].setdefault(name, {})


def _target(node: dict, root: dict) -> Any:
    """The schema a local $ref ("#/$defs/Name", "#/definitions/Name", "#") points to; the node itself otherwise."""
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#"):
        return node
    target: Any = root
    for part in [p.replace("~1", "/").replace("~0", "~") for p in ref[1:].split("/") if p]:
        target = target.get(part) if isinstance(target, dict) else None
    return target if isinstance(target, dict) else node


def _children(node: dict, one: tuple = _SCHEMA_ONE) -> list:
    """The subschemas right under node (of the right JSON types only: a schema not yet checked can hold others)."""
    children = [child for key in _SCHEMA_LISTS if isinstance(node.get(key), list) for child in node[key]]
    children += [child for key in _SCHEMA_MAPS if isinstance(node.get(key), dict) for child in node[key].values()]
    return children + [node.get(key) for key in one]


def _keep_required(node: dict) -> None:
    """A required name the object's `properties` do not list (nor a patternProperties key matches) stays writable, with
    any value, as JSON Schema lets it through as an additional property: closing the object left it unsatisfiable,
    a 400 for a schema that vLLM's grammar backends serve."""
    if not isinstance(node["properties"], dict) or "patternProperties" in node:
        return
    for name in node.get("required") or []:
        if isinstance(name, str) and name not in node["properties"]:
            node["properties"][name] = {}


def _min_length(node: dict) -> int:
    low = node.get("minLength", 0)
    return low if isinstance(low, int) and not isinstance(low, bool) else 0


def without_stray_required(schema: dict) -> dict:
    """A copy of schema without the `required` that is no list (draft-03's `"required": true` on a property, a lone
    name): llama.cpp's json-schema-to-grammar, which builds Ollama's `format` grammar, reads `required` only as an
    array and skips it otherwise (common/json-schema-to-grammar.cpp visit()), so Ollama serves such a schema, with
    those properties optional, where 2020-12's meta-schema refuses it."""
    out = copy.deepcopy(schema)
    _drop_stray_required(out)
    return out


def _drop_stray_required(node: Any) -> None:
    if not isinstance(node, dict):
        return
    if "required" in node and not isinstance(node["required"], list):
        del node["required"]
    for child in _children(node):
        for each in child if isinstance(child, list) else [child]:
            _drop_stray_required(each)


def lenient(schema: dict) -> dict:
    """schema, its grammar leaving a keyword llguidance has no rule for unenforced (llguidance's `lenient` option)
    instead of a 400: uniqueItems (pydantic's set[str]), not, if / then, contains, propertyNames, dependentRequired,
    unevaluatedProperties, minProperties beside optional properties, a oneOf whose branches overlap (read as anyOf).
    llama.cpp's json-schema-to-grammar, which builds Ollama's `format` grammar (llm/llama_server.go SchemaToGrammar),
    skips every keyword it does not read and reads oneOf as anyOf (common/json-schema-to-grammar.cpp visit()); a
    pattern no grammar reads (a look-around) is still refused."""
    return {**schema, "x-guidance": {"lenient": True}}


def _infer_type(node: Any) -> None:
    """A subschema with no `type` that describes an object (`properties`, or an `additionalProperties` other than
    true) is an object's, one with `items` or `prefixItems` an array's, as the grammar backends of vLLM (xgrammar's
    SchemaParser) and of llama.cpp and Ollama (json-schema-to-grammar.cpp visit()) infer them, and one with a `pattern`
    or a date, time or uuid `format` a string's, as llama.cpp does: JSON Schema lets any other type through there, so
    {"b": null} or 5 answered {"properties": {"c": {"type": "integer"}}, "required": ["c"]}. Narrowing keeps every
    output valid; not one under `not` or `if`, whose narrowing would widen the schema, nor one that a composition or a
    literal decides."""
    if not isinstance(node, dict):
        return
    if not any(key in node for key in _DECIDED):
        if "properties" in node or node.get("additionalProperties", True) is not True:
            node["type"] = "object"
        elif "items" in node or "prefixItems" in node:
            node["type"] = "array"
        elif "pattern" in node or node.get("format") in _STRING_FORMATS:
            node["type"] = "string"
    for child in _children(node, _NARROWABLE):
        for each in child if isinstance(child, list) else [child]:
            _infer_type(each)


def bounded_schema(schema: dict, limit: int) -> dict:
    """A copy of schema for the grammar: every output it allows still validates against the original (but for the
    keywords a lenient() schema leaves unenforced)."""
    out = copy.deepcopy(schema)
    _infer_type(out)
    close_open_values(out, limit)
    _widen(out, out)
    _bound(out, limit)
    own = schema.get("x-guidance")
    out["x-guidance"] = {**_JSON_STYLE, **({"lenient": True} if isinstance(own, dict) and own.get("lenient") is True
                                           else {})}
    return out


def any_object_schema(limit: int, max_items: int = 8) -> dict:
    """json_object / format "json": any JSON object, bounded like every grammar schema (keys included)."""
    return {"$defs": any_value_defs("value", "object", limit, max_items), "$ref": "#/$defs/object"}
