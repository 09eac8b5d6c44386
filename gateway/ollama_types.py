"""Gateway process: the types of Ollama's request fields, checked as its Go structs decode them (api/types.go)."""
from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from gateway.errors import InvalidRequest

# Fields read for their value whose type nothing else checks, with the Go type api.GenerateRequest / ChatRequest /
# Message give them. A wrong type there is Go's decode error (Ollama's 400), never read for its truthiness: a
# `"raw": "false"` was raw mode, a `"logprobs": "false"` returned logprobs, a `"messages": {}` was a load request.
_SCALARS = {"bool": "boolean", "string": "string"}
_REQUEST = {"raw": "bool", "logprobs": "bool", "truncate": "bool", "shift": "bool", "suffix": "string"}
_MESSAGE = {"thinking": "string", "tool_name": "string", "tool_call_id": "string"}
_GO_KIND = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}


def _fields(table: dict) -> dict:
    # null is Go's zero value, as encoding/json leaves a field it reads null.
    return {key: {"type": [_SCALARS[go], "null"]} for key, go in table.items()}


def _schema(messages: bool) -> dict:
    properties = _fields(_REQUEST)
    if messages:
        properties["messages"] = {"type": ["array", "null"], "items": {"properties": _fields(_MESSAGE)}}
    return {"type": "object", "properties": properties}


_VALIDATORS = {"ChatRequest": Draft202012Validator(_schema(True)),
               "GenerateRequest": Draft202012Validator(_schema(False))}
_GO_TYPE = {**_REQUEST, **_MESSAGE, "messages": "[]api.Message"}


def check_go_types(body: dict, struct: str) -> None:
    """Ollama's 400 for the first field whose JSON type its Go struct cannot take, in encoding/json's words:
    `json: cannot unmarshal string into Go struct field GenerateRequest.raw of type bool`."""
    error = next(iter(_VALIDATORS[struct].iter_errors(body)), None)
    if error is None:
        return
    names = [part for part in error.absolute_path if isinstance(part, str)]
    value: Any = error.instance
    raise InvalidRequest(f"json: cannot unmarshal {_GO_KIND.get(type(value), 'object')} into Go struct field "
                         f"{struct}.{'.'.join(names)} of type {_GO_TYPE[names[-1]]}",
                         param=".".join(str(part) for part in error.absolute_path))
