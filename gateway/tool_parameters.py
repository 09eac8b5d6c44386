"""Gateway process: a function tool's parameters schema as the tool-call readers and the call grammar use it: a
top-level `$ref` followed and `allOf` branches merged into one object schema."""
from typing import Any

DEFS_KEYS = ("$defs", "definitions")


def tool_parameters(function: dict) -> dict:
    """A function's parameters schema, with a top-level local `$ref` followed to the object it names (keeping the
    `$defs` beside it): zod-to-json-schema with a name writes {"$ref": "#/definitions/Args", "definitions": {...}}, and
    a forced call read no `properties` there, so it came back as {} without its required parameters."""
    params = function.get("parameters") or {}
    seen = set()
    while isinstance(params, dict) and "properties" not in params and isinstance(params.get("$ref"), str):
        ref = params["$ref"]
        target = local_target(function.get("parameters") or {}, ref)
        if ref in seen or not isinstance(target, dict):
            break
        seen.add(ref)
        shared = {key: value for key, value in params.items() if key in DEFS_KEYS + ("$schema",)}
        params = {**shared, **target}
    return _merged_all_of(params, function.get("parameters") or {}) if isinstance(params, dict) else {}


# What an allOf branch may hold for its properties to be merged into the parameters': anything else (a closed branch,
# a nested union, counts of keys) would be lost in the merge, so such parameters stay as they are.
_MERGEABLE = {"type", "properties", "required", "title", "description", "$comment", "examples", "default", "$ref"}


def _merged_all_of(params: dict, root: dict) -> dict:
    """Parameters that list their properties in allOf branches (a $ref'd base and its extension, zod's .and(), an
    OpenAPI-derived tool) as one object schema: each branch's properties (a name two branches list: the allOf of both)
    and required names. A forced call writes parameters from `properties`, so such a tool was called with {} (its
    required parameters missing), and a call's values were typed by no schema."""
    branches = [params] + [local_target(root, b["$ref"]) if isinstance(b, dict) and isinstance(b.get("$ref"), str)
                           else b for b in params.get("allOf") or []]
    if len(branches) == 1 or not all(isinstance(b, dict) and set(b) <= _MERGEABLE | {"allOf", *DEFS_KEYS, "$schema"}
                                     and (b is params or "allOf" not in b) for b in branches):
        return params
    props, required = {}, []
    for branch in branches:
        for name, schema in (branch.get("properties") or {}).items():
            props[name] = {"allOf": [props[name], schema]} if name in props else schema
        required += [name for name in branch.get("required") or [] if name not in required]
    merged = {key: value for key, value in params.items() if key != "allOf"}
    return {**merged, "type": "object", "properties": props, "required": required}


def local_target(root: dict, ref: str) -> Any:
    """What a local JSON pointer ref (#/definitions/Args) points to in root, or None."""
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
