"""Gateway process: the types of Ollama's request fields, checked as its Go structs decode them (api/types.go)."""
from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator, validators

from gateway.errors import InvalidRequest
from gateway.go_base64 import base64_error

# Each request body's fields with the JSON type its Go struct gives them (api/types.go), and the Go type encoding/json
# names when a value does not fit (`goType`, a keyword jsonschema ignores). A wrong type is Go's decode error (Ollama's
# 400), never read for its truthiness: `"raw": "false"` was raw mode, `"prompt": 0` an empty prompt, `"tools": 0`
# no tools, `"messages": {}` a load request. null is Go's zero value, as encoding/json leaves a field it reads null.
# Fields with their own decoders (format, think, keep_alive) are not listed here; options, context and top_logprobs
# are, so a value of the wrong JSON type gets encoding/json's words before their own checks of the values.


def _go(kind: str, go_type: str, **more: Any) -> dict:
    return {"type": [kind, "null"], "goType": go_type, **more}


def _struct(go_type: str, **fields: dict) -> dict:
    return _go("object", go_type, properties=fields)


_STRING, _BOOL, _INT = _go("string", "string"), _go("boolean", "bool"), _go("integer", "int")
_MAP = _go("object", "map[string]interface {}")
_IMAGES = _go("array", "[]api.ImageData", items=_go("string", "api.ImageData"))
# Ollama reads arguments with its ordered map's own UnmarshalJSON, which refuses anything but an object in its words
# (ollama_messages._tool_call); a JSON text of one is taken too, as OpenAI clients write them.
_ARGUMENTS = {"goType": "api.ToolCallFunctionArguments"}
_TOOL_CALL = _struct("api.ToolCall", id=_STRING, function=_struct("api.ToolCallFunction", name=_STRING,
                                                                  arguments=_ARGUMENTS))
# api.Message has its own UnmarshalJSON (it lower-cases the role): the request's decoder does not walk into it, so an
# error inside a message names the struct that holds the list (ChatRequest), not api.Message (goUnmarshaler).
_MESSAGE = _struct("api.Message", role=_STRING, content=_STRING, thinking=_STRING, images=_IMAGES,
                   tool_calls=_go("array", "[]api.ToolCall", items=_TOOL_CALL), tool_name=_STRING,
                   tool_call_id=_STRING) | {"goUnmarshaler": True}
_STRINGS = _go("array", "[]string", items=_STRING)
# A tool's properties: api.ToolPropertiesMap, an ordered map with its own UnmarshalJSON (its jsonparser's words for
# anything but an object: goMalformed), of api.ToolProperty structs, whose fields Go types as any other (goMap: the
# keys are no field names). The struct refers to itself (anyOf, nested properties): the dicts do too.
_PROPERTY = _struct("api.ToolProperty", anyOf=None, type=_go("string", "[]string", type=["string", "array", "null"],
                                                              items=_STRING),
                    description=_STRING, enum=_go("array", "[]interface {}"), properties=None, required=_STRINGS)
_PROPERTIES = {"type": ["object", "null"], "goType": "*api.ToolPropertiesMap", "goMalformed": True,
               "goUnmarshaler": True, "goMap": True, "additionalProperties": _PROPERTY}
_PROPERTY["properties"].update(anyOf=_go("array", "[]api.ToolProperty", items=_PROPERTY), properties=_PROPERTIES)
_FUNCTION = _struct("api.ToolFunction", name=_STRING, description=_STRING,
                    parameters=_struct("api.ToolFunctionParameters", type=_STRING, required=_STRINGS,
                                       properties=_PROPERTIES))
_TOOLS = _go("array", "api.Tools", items=_struct("api.Tool", type=_STRING, function=_FUNCTION))
_SHARED = {"model": _STRING, "stream": _BOOL, "truncate": _BOOL, "shift": _BOOL, "logprobs": _BOOL,
           "top_logprobs": _INT, "options": _MAP, "_debug_render_only": _BOOL, "runner": _STRING}
_NAMED = {"model": _STRING, "name": _STRING}
_STRUCTS = {
    "GenerateRequest": dict(_SHARED, prompt=_STRING, suffix=_STRING, system=_STRING, template=_STRING, raw=_BOOL,
                            images=_IMAGES, context=_go("array", "[]int", items=_INT)),
    "ChatRequest": dict(_SHARED, messages=_go("array", "[]api.Message", items=_MESSAGE), tools=_TOOLS),
    "ShowRequest": dict(_NAMED, system=_STRING, template=_STRING, verbose=_BOOL, options=_MAP),
    "PullRequest": dict(_NAMED, insecure=_BOOL, username=_STRING, password=_STRING, stream=_BOOL),
    "DeleteRequest": _NAMED,
    "PushRequest": dict(_NAMED, insecure=_BOOL, username=_STRING, password=_STRING, stream=_BOOL),
    "CopyRequest": {"source": _STRING, "destination": _STRING},
    "EmbedRequest": {"model": _STRING, "truncate": _BOOL, "dimensions": _INT, "options": _MAP},
    "EmbeddingRequest": {"model": _STRING, "prompt": _STRING, "options": _MAP},
    "CreateRequest": dict(_NAMED, stream=_BOOL, quantize=_STRING, draft_quantize=_STRING, template=_STRING,
                          system=_STRING, renderer=_STRING, parser=_STRING, parameters=_MAP,
                          files=_go("object", "map[string]string"), adapters=_go("object", "map[string]string"),
                          messages=_go("array", "[]api.Message", items=_MESSAGE), **{"from": _STRING}),
}

# Each struct's fields with decoders of their own, which _STRUCTS leaves out: their names match keys too.
_OWN_DECODERS = {"GenerateRequest": ("format", "keep_alive", "think"), "ChatRequest": ("format", "keep_alive", "think"),
                 "EmbedRequest": ("input", "keep_alive"), "EmbeddingRequest": ("keep_alive",)}


def _field_keys(value: Any, schema: dict, more: tuple = ()) -> Any:
    """value with its keys named as the Go struct's fields: encoding/json matches a key to a field's json name
    exactly, else case-insensitively ({"Model": ..., "Messages": [{"Role": ...}]} is a ChatRequest; of two keys for
    one field the later wins); a map's keys (options) stay as sent, and a key no field takes is kept (and ignored)."""
    if isinstance(value, list) and "items" in schema:
        return [_field_keys(item, schema["items"]) for item in value]
    fields = schema.get("properties")
    if not isinstance(value, dict) or fields is None:
        return value
    names = {*fields, *more}
    folded = {name.lower(): name for name in names}
    out = {}
    for key, item in value.items():
        name = key if key in names else folded.get(key.lower(), key)
        out[name] = _field_keys(item, fields[name]) if name in fields else item
    return out


# The runner names Ollama's chat and generate take, each spelling of one (server/routes.go normalizeRunner; the
# manifest package's RunnerMLX "mlx", RunnerOllama "ollama", RunnerLlamaCPP "llamacpp"), read trimmed and lower-cased.
_RUNNERS = frozenset({"", "mlx", "mlxrunner", "ollama", "ggml", "llamacpp", "llama.cpp", "llama-cpp", "llama_cpp"})


def check_runner(runner: Any) -> None:
    """Ollama's 400 `unknown runner "x"` for a runner it has no name for, checked before the model is looked up
    (ChatHandler, GenerateHandler); a known one changes nothing here: this server has one runner."""
    if runner and runner.strip().lower() not in _RUNNERS:
        raise InvalidRequest(f"unknown runner {json.dumps(runner, ensure_ascii=False)}", param="runner")


def _is_go_int(checker, instance: Any) -> bool:
    # A Go int takes a JSON number without a fraction or exponent that fits 64 bits (2.0 is "number 2.0").
    return isinstance(instance, int) and not isinstance(instance, bool) and -(1 << 63) <= instance < 1 << 63


def _in_body_order(keyword: str):
    """A struct's fields (properties) or a map's entries (additionalProperties) checked in the body's order, as
    encoding/json decodes them and reports the first that fails (jsonschema walks a schema's properties in its own
    order and a map's keys as a set)."""
    def check(validator, subschemas, instance, schema):
        if not validator.is_type(instance, "object"):
            return
        for key, value in instance.items():
            subschema = subschemas.get(key) if keyword == "properties" else subschemas
            if isinstance(subschema, dict):
                yield from validator.descend(value, subschema, path=key)
    return check


_GoValidator = validators.extend(Draft202012Validator,
                                 {"properties": _in_body_order("properties"),
                                  "additionalProperties": _in_body_order("additionalProperties")},
                                 type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_go_int))
_VALIDATORS = {name: _GoValidator({"type": "object", "goType": f"api.{name}", "properties": fields})
               for name, fields in _STRUCTS.items()}
_GO_KIND = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}


def _check_images(body: dict, struct: str) -> None:
    """Ollama's 400 for an image (api.ImageData, a []byte) its decoder cannot read as base64, in encoding/json's words
    (go_base64): the struct's own images (GenerateRequest's) and each message's, in the order they are written."""
    fields = _STRUCTS[struct]
    messages = body.get("messages") if "messages" in fields and isinstance(body.get("messages"), list) else []
    for where, images in [("images", body.get("images") if "images" in fields else None)] + [
            (f"messages.{i}.images", message.get("images")) for i, message in enumerate(messages)
            if isinstance(message, dict)]:
        for index, image in enumerate(images or []):
            words = base64_error(image) if isinstance(image, str) else None
            if words:
                raise InvalidRequest(words, param=f"{where}.{index}")


def _go_struct(struct: str, path: list) -> str:
    """The struct encoding/json names in a type error at `path`: the innermost struct whose field it was decoding
    (decodeState.object sets errorContext.Struct = t per field), not past a type with its own UnmarshalJSON, whose
    error the outer decoder names after its own struct ("ToolFunction.tools.function.parameters", but
    "ChatRequest.messages.role")."""
    name, node = struct, {"properties": _STRUCTS[struct]}
    for part in path[:-1]:
        node = node["items"] if isinstance(part, int) else node["properties"][part]
        if node.get("goUnmarshaler"):
            break
        if "properties" in node:
            name = node["goType"].removeprefix("api.")
    return name


def _go_fields(struct: str, path: list) -> list:
    """The field names encoding/json joins for `path`: its keys, less list indices and a map's keys (goMap)."""
    names, node = [], {"properties": _STRUCTS[struct]}
    for part in path:
        if isinstance(part, int):
            node = node.get("items", {})
        elif node.get("goMap"):
            node = node["additionalProperties"]
        else:
            names.append(part)
            node = node.get("properties", {}).get(part, {})
    return names


def check_go_types(body: Any, struct: str) -> dict:
    """The body as Ollama's api struct takes it ({} for a null body, which encoding/json decodes into the empty
    struct without error), or Ollama's 400 for the first field whose JSON type its Go struct cannot take, in
    encoding/json's words: `json: cannot unmarshal string into Go struct field GenerateRequest.raw of type bool` (a
    body that is no object: `... into Go value of type api.ShowRequest`); an image that is no base64 is its
    `illegal base64 data at input byte 4`."""
    if body is None:
        return {}
    body = _field_keys(body, {"properties": _STRUCTS[struct]}, _OWN_DECODERS.get(struct, ()))
    error = next(iter(_VALIDATORS[struct].iter_errors(body)), None)
    if error is None:
        _check_images(body, struct)
        return body
    kind = _GO_KIND.get(type(error.instance), "object")
    go_type = error.schema.get("goType", "object")
    if go_type == "int" and kind == "number":
        # encoding/json names the number a Go int cannot take: "number 1.5".
        kind = f"number {error.instance}"
    if error.schema.get("goMalformed") and error.validator == "type":
        # The ordered map's UnmarshalJSON (buger/jsonparser ObjectEach) on anything but an object.
        raise InvalidRequest("Value looks like object, but can't find closing '}' symbol",
                             param=".".join(str(part) for part in error.absolute_path))
    names = _go_fields(struct, list(error.absolute_path))
    where = f"Go struct field {_go_struct(struct, list(error.absolute_path))}.{'.'.join(names)}" if names else "Go value"
    raise InvalidRequest(f"json: cannot unmarshal {kind} into {where} of type {go_type}",
                         param=".".join(str(part) for part in error.absolute_path) or None)
