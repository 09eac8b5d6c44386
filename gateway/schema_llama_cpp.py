"""Gateway process: a JSON schema as llama.cpp's json-schema-to-grammar reads it, for the fields whose grammar it builds
on the servers that define them: llama.cpp's `json_schema` and `response_format` `{type, schema}` forms, Ollama's
`format` (Ollama builds that grammar with llama.cpp's converter: llm/llama_server.go SchemaToGrammar)."""
from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from gateway.schema_bounds import without_stray_required

# The keywords whose values are subschemas, lists of them or maps of them (never data: const, enum, default).
_ONE = ("items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def llama_cpp_schema(schema: Any) -> Any:
    """A copy of schema as llama.cpp's converter reads it (common/json-schema-to-grammar.cpp visit()): a `required` that
    is no list skipped (schema_bounds.without_stray_required), and, in a schema written to 2020-12 (no $schema naming
    an older draft, which reads such a list itself), an `items` list is the tuple llama.cpp makes of it, exactly those
    items in order (`"[" item0 "," item1 "]"`): 2020-12's `prefixItems` with no further items, each one required.
    2020-12's meta-schema refused that `items` list (draft-07's tuple, as zod-to-json-schema writes one), a 400 where
    llama-server's own test serves {"type": "json_object", "schema": {"items": [{"type": "integer"}]}}
    (tools/server/tests/unit/test_chat_completion.py test_completion_with_response_format)."""
    if not isinstance(schema, dict):
        return schema   # check_schema refuses it
    out = without_stray_required(schema)
    draft = out.get("$schema", "")
    if not isinstance(draft, str) or validator_for(out, default=Draft202012Validator) is Draft202012Validator:
        _tuples(out)
    return out


def _tuples(node: Any) -> None:
    if not isinstance(node, dict):
        return
    items = node.get("items")
    if isinstance(items, list):
        node["prefixItems"] = items
        if "additionalItems" in node:
            # The schema says what may follow the tuple: draft-07's meaning, kept.
            node["items"] = node.pop("additionalItems")
        else:
            node["items"] = False
            node.setdefault("minItems", len(items))
    for key in _ONE:
        _tuples(node.get(key))
    for key in _LISTS:
        for child in node.get(key) if isinstance(node.get(key), list) else []:
            _tuples(child)
    for key in _MAPS:
        for child in node.get(key).values() if isinstance(node.get(key), dict) else []:
            _tuples(child)
