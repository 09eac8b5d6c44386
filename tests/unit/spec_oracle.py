"""Test support: the APIs' published response schemas (tests/unit/spec_schemas, sources in its README) as JSON Schema
validators, and the bodies of one request, whole or streamed (SSE with its event names, or NDJSON), to hold up to them.

Where a spec types a field more narrowly than the API itself answers (the API's own examples in the same spec, or the
SDK generated from it, carry the other value), the test lists the place in ALLOWED with the reason, not the schema."""
import json
import os
import re
from functools import lru_cache

import jsonschema

SPEC_DIR = os.path.join(os.path.dirname(__file__), "spec_schemas")
# (api, schema, path as a regex over "a/0/b", the value's JSON type): the published spec narrower than the API.
ALLOWED = [
    # openapi.yaml's own Response examples (and openai-python's Response.user: Optional[str]) carry "user": null.
    ("openai", r"(Response|Response\w*Event)", r"(response/)?user", "null"),
    # OpenAI's response.created / in_progress events carry "usage": null (openapi.yaml's streaming examples,
    # openai-python's Response.usage: Optional[ResponseUsage]) until the response is done.
    ("openai", r"Response(Created|InProgress)Event", r"response/usage", "null"),
    # A /v1/completions stream chunk is typed CreateCompletionResponse, whose finish_reason and usage are not
    # nullable; OpenAI and vLLM send null on every chunk but a choice's last (vllm/entrypoints/openai/protocol.py
    # CompletionResponseStreamChoice.finish_reason: Optional[str], usage: Optional[UsageInfo]).
    ("openai", r"CreateCompletionResponse", r"choices/\d+/finish_reason|usage", "null"),
    # echo with logprobs: the prompt's first token has no logprob, null in token_logprobs and top_logprobs (OpenAI's
    # legacy completions, vLLM's _create_completion_logprobs).
    ("openai", r"CreateCompletionResponse", r"choices/\d+/logprobs/(token_logprobs|top_logprobs)/0", "null"),
    # Anthropic's errors page documents 413 request_too_large, an error type the SDK's ErrorObject union lacks.
    ("anthropic", r"ErrorResponse", r"error", "request_too_large"),
]


@lru_cache(maxsize=None)
def _document(api: str) -> dict:
    with open(os.path.join(SPEC_DIR, f"{api}.json")) as f:
        return json.load(f)


@lru_cache(maxsize=None)
def validator(api: str, schema: str) -> jsonschema.Draft202012Validator:
    """A validator of the component schema `schema` of `api` ("openai", "ollama", "anthropic"), $refs resolved."""
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": f"#/components/schemas/{schema}"}
    return jsonschema.Draft202012Validator({**root, **_document(api)})


def branch(api: str, union: str, event_type: str) -> str:
    """The member of the union schema `union` (an anyOf / oneOf of $refs) whose `type` property is `event_type`."""
    schemas = _document(api)["components"]["schemas"]
    node = schemas[union]
    members = node.get("anyOf") or node.get("oneOf") or []
    for member in members:
        name = member["$ref"].rsplit("/", 1)[-1]
        if event_type in schemas[name].get("properties", {}).get("type", {}).get("enum", ()) or \
                schemas[name].get("properties", {}).get("type", {}).get("const") == event_type:
            return name
    raise KeyError(f"{union} has no member of type {event_type!r}")


def _allowed(api: str, schema: str, error) -> bool:
    path = "/".join(map(str, error.absolute_path))
    value = error.instance
    kind = "null" if value is None else value.get("type") if isinstance(value, dict) else type(value).__name__
    return any(a == api and re.fullmatch(s, schema) and re.fullmatch(p, path) and kind == k
               for a, s, p, k in ALLOWED)


def spec_errors(api: str, schema: str, body) -> list:
    """Where `body` breaks the published `schema` of `api`, as "path: message" lines, ALLOWED places left out."""
    out = []
    for error in validator(api, schema).iter_errors(body):
        best = jsonschema.exceptions.best_match([error])
        if not _allowed(api, schema, best):
            out.append(f"{schema} {'/'.join(map(str, best.absolute_path))}: {best.message[:200]}")
    return out


def strict(model, body) -> list:
    """Where `body` fails the SDK's pydantic `model` validated strictly, as "Model path: message" lines."""
    try:
        model.model_validate_json(json.dumps(body), strict=True)
    except Exception as e:  # pydantic.ValidationError
        return [f"{model.__name__} {'/'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
    return []


def sse(raw: bytes) -> list:
    """[(event name or None, data)] of an SSE body; data is the parsed JSON, or "[DONE]"."""
    events = []
    for block in raw.decode().split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data:
            text = "\n".join(data)
            events.append((name, text if text == "[DONE]" else json.loads(text)))
    return events


def ndjson(raw: bytes) -> list:
    return [json.loads(line) for line in raw.splitlines() if line.strip()]
