"""Gateway process: a request body checked against its API's JSON schema (jsonschema); the first violation becomes a 400
naming the field, and integral floats where the schema wants integers become ints."""
from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from gateway.errors import InvalidRequest
from gateway.pydantic_scalars import lax_scalars
from gateway.schema_errors import best_error, error_message

# Each schema's validator by the schema's id (every schema is a module-level constant).
_VALIDATORS = {}


def compile_schema(schema: dict) -> Draft202012Validator:
    """The schema's validator, compiled on its first use."""
    validator = _VALIDATORS.get(id(schema))
    if validator is None:
        validator = _VALIDATORS[id(schema)] = Draft202012Validator(schema)
    return validator


def _param_name(path) -> str:
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name


def _all_need_items(error) -> bool:
    """An anyOf error whose every list alternative was refused for its length only (and no other alternative fits)."""
    return error.validator == "anyOf" and bool(error.context) and all(
        sub.validator in ("minItems", "type") for sub in error.context) and any(
        sub.validator == "minItems" for sub in error.context)


def empty_array(param: str) -> InvalidRequest:
    """OpenAI's refusal of an empty list where it needs at least one item (its words, a hint added)."""
    return InvalidRequest(f"[] is too short - '{param}': send at least one item (an optional list can be left out)",
                          param=param, code="empty_array")


def _wants_integer(schema: dict) -> bool:
    kind = schema.get("type")
    return kind == "integer" or (isinstance(kind, list) and "integer" in kind)


def integral(value: Any, schema: Any) -> Any:
    """value with every integral float (5.0) where schema wants an integer made an int, as pydantic (vLLM) reads
    it; JSON Schema counts 5.0 as an integer, but token counts, ids and seeds must reach the scheduler as ints."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, float) and value.is_integer() and _wants_integer(schema):
        return int(value)
    for alternative in schema.get("anyOf", ()):
        value = integral(value, alternative)
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                value[key] = integral(value[key], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        value = [integral(item, schema["items"]) for item in value]
    return value


def validate(body: Any, schema: dict) -> dict:
    """Returns body (read as vLLM's pydantic models read it: "0.7" a number where one is wanted, integral floats
    made ints) when it matches schema; otherwise raises InvalidRequest for the first error."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", code="invalid_type")
    lax_scalars(body, schema)
    error = next(iter(sorted(compile_schema(schema).iter_errors(body), key=lambda e: list(e.path))), None)
    if error is None:
        return integral(body, schema)
    # An empty list where every alternative needs items (prompt: [], prompt: [[]]) is named as one, not as a type.
    if error.instance == [] and (error.validator == "minItems" or _all_need_items(error)):
        raise empty_array(_param_name(error.path))
    # Where an anyOf stops jsonschema short of a reason, the reason inside the alternative the value is of (stop: [1]
    # is "stop[0]: 1 is not of type 'string'", not "[1] is not valid under any of the given schemas").
    error = best_error([error])
    param = _param_name(error.absolute_path)
    if error.instance == [] and error.validator == "minItems":
        raise empty_array(param)
    if error.validator == "required":
        missing = next((key for key in error.validator_value if key not in error.instance), "")
        field_name = f"{param}.{missing}" if param else missing
        raise InvalidRequest(f"'{field_name}' is a required property", param=field_name,
                             code="missing_required_parameter")
    code = "invalid_type" if error.validator in ("type", "anyOf", "oneOf") else "invalid_value"
    raise InvalidRequest(f"invalid value for '{param}': {error_message(error)}", param=param or None, code=code)
