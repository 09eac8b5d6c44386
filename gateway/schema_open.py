"""Gateway process: the values a JSON schema leaves open (any JSON), as bounded schemas in its grammar copy.

A schema of no type takes any JSON value: pydantic writes one for an `Any` field ({"title": "X"}), `{}` or `true` for
a list's items, and `{"type": "object"}` / `{"type": "array"}` for a bare dict or list. llguidance's own rule for such a
value writes any JSON number, exponent and all: the random tiny model answered {"x": -39.2e16426212997220033224538}
for a pydantic model with an `Any` field, [79E0649] for {"type": "array"}, numbers no double holds (Python and pydantic
read inf, Go's encoding/json refuses them), where every other number of the grammar copy is finite
(gateway.schema_bounds). The copy reads each open value as the one that json_object writes, bounded the same way: a
string, a finite number, a boolean, null, or an array / object of such values.
"""
from __future__ import annotations

from typing import Any

# Definitions added to the root of the grammar copy (names no client schema is likely to hold).
ANY_VALUE, ANY_OBJECT = "sparkinfer_any_value", "sparkinfer_any_object"
# Keys that say nothing of a value (or belong to the node, not to one of its types).
ANNOTATIONS = {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly",
               "$defs", "definitions", "$schema", "$id", "$anchor", "x-guidance"}
_CHILD_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_CHILD_LISTS = ("anyOf", "oneOf", "prefixItems")


def key_pattern(limit: int) -> str:
    """The keys of an open object: at most `limit` characters (0 = unbounded)."""
    return f"^.{{0,{limit}}}$" if limit else "^.*$"


def any_value_defs(value: str, obj: str, limit: int, max_items: int = 8) -> dict:
    """$defs of any JSON value and any object (at most max_items members or items each), referring to each other by
    these names."""
    value_ref, object_ref = {"$ref": f"#/$defs/{value}"}, {"$ref": f"#/$defs/{obj}"}
    any_value = {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
                           {"type": "array", "items": value_ref, "maxItems": max_items}, object_ref]}
    any_object = {"type": "object", "patternProperties": {key_pattern(limit): value_ref},
                  "additionalProperties": False, "maxProperties": max_items}
    return {value: any_value, obj: any_object}


def _own_base(node: Any) -> bool:
    """A subschema with its own $id (draft-04's id) resolves "#/$defs/..." against itself: it is left as sent."""
    return isinstance(node, dict) and (isinstance(node.get("$id"), str) or isinstance(node.get("id"), str))


def _is_open(node: Any) -> bool:
    return node is True or (isinstance(node, dict) and not _own_base(node) and all(key in ANNOTATIONS for key in node))


def _closed(node: Any) -> Any:
    """node, an open value made the bounded any-value (its annotations and $defs kept beside the $ref)."""
    if node is True:
        return {"$ref": f"#/$defs/{ANY_VALUE}"}
    node["$ref"] = f"#/$defs/{ANY_VALUE}"
    return node


def _has_type(node: dict, kind: str) -> bool:
    types = node.get("type")
    return kind in types if isinstance(types, list) else types == kind


def _bound_node(node: dict) -> None:
    if _has_type(node, "object") and not any(key in node for key in ("properties", "patternProperties")) \
            and node.get("additionalProperties", True) is True:
        # A bare dict: its values (gateway.schema_bounds caps its keys as a map's).
        node["additionalProperties"] = {}
    if _has_type(node, "array") and "items" not in node:
        node["items"] = {}
    for key in _CHILD_MAPS:
        children = node.get(key)
        if isinstance(children, dict):
            for name, child in children.items():
                children[name] = _closed(child) if _is_open(child) else child
    for key in _CHILD_LISTS + ("items",):
        children = node.get(key)
        if isinstance(children, list):
            # draft-07's tuple `items` list too.
            children[:] = [_closed(child) if _is_open(child) else child for child in children]
    for key in ("items", "additionalProperties"):
        if _is_open(node.get(key)):
            node[key] = _closed(node[key])


def _walk(node: Any, root: bool = False) -> None:
    if not isinstance(node, dict) or (_own_base(node) and not root):
        return
    _bound_node(node)
    for key in _CHILD_MAPS:
        for child in (node.get(key) or {}).values() if isinstance(node.get(key), dict) else ():
            _walk(child)
    for key in _CHILD_LISTS + ("allOf", "items"):
        for child in node.get(key) if isinstance(node.get(key), list) else ():
            _walk(child)
    for key in ("items", "additionalProperties"):
        _walk(node.get(key))


def close_open_values(root: dict, limit: int) -> None:
    """In place, on a grammar copy before its objects are closed: every open value (no type, only annotations; `true`;
    a bare object's values; a bare array's items) becomes a $ref to the bounded any-value, whose definitions join the
    root's $defs when one was needed. An open allOf branch itself is left (the others type the value), and so is a
    subschema with its own $id, where "#/$defs/..." would name its own definitions."""
    _walk(root, root=True)
    if all(key in ANNOTATIONS for key in root):
        _closed(root)
    if _uses_any(root):
        root.setdefault("$defs", {}).update(any_value_defs(ANY_VALUE, ANY_OBJECT, limit))


def _uses_any(node: Any) -> bool:
    if isinstance(node, dict):
        return node.get("$ref") == f"#/$defs/{ANY_VALUE}" or any(_uses_any(child) for child in node.values())
    if isinstance(node, list):
        return any(_uses_any(child) for child in node)
    return False
