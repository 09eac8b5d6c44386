"""Gateway with the fake scheduler over loopback: a sweep of hostile bodies over every API's body routes. Each field
gets each wrong JSON type, and each route malformed, mis-encoded and oversized bodies: the answer is a 200 or a 4xx
in that API's own error shape with a message, never a 5xx."""
import gzip
import json

import orjson
import pytest

from gateway import anthropic_schema, openai_schema, responses_schema
from gateway.go_json import go_decode, go_decode_error

HI = [{"role": "user", "content": "Hi"}]
CHAT = {"model": "fake-model", "messages": HI, "max_tokens": 2}
COMPLETION = {"model": "fake-model", "prompt": "Hi", "max_tokens": 2}
RESPONSES = {"model": "fake-model", "input": "Hi", "max_output_tokens": 2}
MESSAGES = {"model": "fake-model", "max_tokens": 2, "messages": HI}
OLLAMA_CHAT = {"model": "fake-model", "messages": HI, "stream": False, "options": {"num_predict": 2}}
OLLAMA_GENERATE = {"model": "fake-model", "prompt": "Hi", "stream": False, "options": {"num_predict": 2}}
LMSTUDIO_V1 = {"model": "fake-model", "input": "Hi", "max_output_tokens": 2}
OLLAMA_FIELDS = ["model", "messages", "prompt", "system", "template", "context", "stream", "raw", "format", "images",
                 "suffix", "think", "keep_alive", "options", "tools", "logprobs", "top_logprobs", "truncate", "shift",
                 "_debug_render_only", "name", "verbose", "insecure", "source", "destination", "input"]
LMSTUDIO_V1_FIELDS = ["model", "input", "system_prompt", "stream", "temperature", "top_p", "top_k", "min_p",
                      "repeat_penalty", "max_output_tokens", "reasoning", "context_length", "store",
                      "previous_response_id", "integrations"]
# Nested fields whose type picks a code path (a handler, a block kind, a role).
NESTED = {"messages.0.role", "messages.0.content", "input.0.type", "input.0.role", "input.0.content", "items.0.type",
          "items.0.role", "items.0.content"}


def _fields(schema: dict) -> list:
    return sorted(schema["properties"])


# (method, path, the error shape's name, a valid body, the fields to spoil)
ROUTES = [
    ("POST", "/v1/chat/completions", "openai", CHAT, _fields(openai_schema.CHAT_SCHEMA)),
    ("POST", "/api/v0/chat/completions", "openai", CHAT, _fields(openai_schema.CHAT_SCHEMA)),
    ("POST", "/v1/completions", "openai", COMPLETION, _fields(openai_schema.COMPLETION_SCHEMA)),
    ("POST", "/api/v0/completions", "openai", COMPLETION, _fields(openai_schema.COMPLETION_SCHEMA)),
    ("POST", "/v1/tokenize", "openai", {"model": "fake-model", "prompt": "Hi"}, _fields(openai_schema.TOKENIZE_SCHEMA)),
    ("POST", "/v1/detokenize", "openai", {"model": "fake-model", "tokens": [1]},
     _fields(openai_schema.DETOKENIZE_SCHEMA)),
    ("POST", "/v1/embeddings", "openai", {"model": "fake-model", "input": "Hi"}, ["model", "input"]),
    ("POST", "/v1/responses", "openai", RESPONSES, _fields(responses_schema.RESPONSES_SCHEMA)),
    ("POST", "/v1/responses/input_tokens", "openai", RESPONSES, _fields(responses_schema.RESPONSES_SCHEMA)),
    ("POST", "/v1/messages", "anthropic", MESSAGES, _fields(anthropic_schema.MESSAGES_SCHEMA)),
    ("POST", "/v1/messages/count_tokens", "anthropic", {"model": "fake-model", "messages": HI},
     _fields(anthropic_schema.COUNT_SCHEMA)),
    ("POST", "/api/v1/chat", "openai", LMSTUDIO_V1, LMSTUDIO_V1_FIELDS),
    ("POST", "/api/chat", "ollama", OLLAMA_CHAT, OLLAMA_FIELDS),
    ("POST", "/api/generate", "ollama", OLLAMA_GENERATE, OLLAMA_FIELDS),
    ("POST", "/api/show", "ollama", {"model": "fake-model"}, OLLAMA_FIELDS),
    ("POST", "/api/pull", "ollama", {"model": "fake-model", "stream": False}, OLLAMA_FIELDS),
    ("POST", "/api/embed", "ollama", {"model": "fake-model", "input": "Hi"}, OLLAMA_FIELDS),
    ("POST", "/api/copy", "ollama", {"source": "fake-model", "destination": "x"}, OLLAMA_FIELDS),
    ("DELETE", "/api/delete", "ollama", {"model": "fake-model"}, OLLAMA_FIELDS),
    # OpenAI's Conversations API: its items are Responses input items (a list holding 1 was a 500).
    ("POST", "/v1/conversations", "openai", {"items": HI, "metadata": {"k": "v"}}, ["items", "metadata"]),
]
WRONG_VALUES = ["abc", 123, -1, 0, None, True, {"a": {"b": [1]}}, [1, "a", None], "", [], 10 ** 40, 1e300]
JSON = {"Content-Type": "application/json"}
BODIES = [
    (b"{not json", JSON), (b"", JSON), (b"[1, 2]", JSON), (b"null", JSON), (b'{"model": 1e309}', JSON),
    (b'{"model": NaN}', JSON), (b'{"model": "a\xff"}', JSON), (b'{"model": "\\ud800"}', JSON),
    (b'{"a": ' + b"[" * 10000 + b"]" * 10000 + b"}", JSON), (b'{"model": "x"} trailing', JSON),
    (gzip.compress(b'{"model": "x"}')[:-6], {**JSON, "Content-Encoding": "gzip"}),
    (b'{"model": "x"}', {**JSON, "Content-Encoding": "br"}),
]


def _go_reads(data: bytes) -> bool:
    """Whether Go's json.Decoder reads an object from data (gateway/go_json.py), as Ollama's routes read a body."""
    try:
        return go_decode_error(data) is None and isinstance(go_decode(data), dict)
    except (ValueError, RecursionError):
        return False


def _error_shape_ok(api: str, body) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    if api == "ollama":
        return set(body) == {"error"} and isinstance(error, str) and bool(error)
    if api == "anthropic":
        return (body.get("type") == "error" and isinstance(error, dict) and isinstance(error.get("type"), str)
                and isinstance(error.get("message"), str) and bool(error["message"]))
    return (set(body) == {"error"} and isinstance(error, dict) and {"message", "type", "param", "code"} <= set(error)
            and isinstance(error["message"], str) and bool(error["message"]))


def _spoiled(base: dict, field: str, value) -> dict:
    body = json.loads(json.dumps(base))
    parts = field.split(".")
    if len(parts) == 1:
        return {**body, field: value}
    if parts[0] == "input" and not isinstance(body.get("input"), list):
        body["input"] = [{"role": "user", "content": "Hi"}]
    body[parts[0]][int(parts[1])][parts[2]] = value
    return body


async def _faults(client, method: str, path: str, api: str, requests) -> list:
    faults = []
    for label, data, headers in requests:
        response = await client.request(method, path, data=data, headers=headers)
        raw = await response.read()
        if response.status >= 500 and response.status != 501:
            faults.append(f"{label}: {response.status} {raw[:200]!r}")
        elif 400 <= response.status < 500 and not _error_shape_ok(api, orjson.loads(raw)):
            faults.append(f"{label}: {response.status} not {api}'s error shape: {raw[:200]!r}")
    return faults


@pytest.mark.parametrize("method, path, api, base, fields", ROUTES, ids=[route[1] for route in ROUTES])
async def test_every_field_of_a_wrong_type_is_a_4xx_in_the_apis_shape_never_a_5xx(fake, method, path, api, base,
                                                                                  fields):
    client, servicer = fake
    servicer.script.reply = "Hi"
    spoilt = [field for field in [*fields, *NESTED] if field.split(".")[0] in base or "." not in field]
    requests = [(f"{field}={value!r:.20}", json.dumps(_spoiled(base, field, value)).encode(), JSON)
                for field in spoilt for value in WRONG_VALUES]
    assert await _faults(client, method, path, api, requests) == []


@pytest.mark.parametrize("method, path, api, base, fields", ROUTES, ids=[route[1] for route in ROUTES])
async def test_a_body_that_cannot_be_read_is_a_4xx_in_the_apis_shape(fake, method, path, api, base, fields):
    client, servicer = fake
    requests = [(f"body {data[:20]!r} {headers}", data, headers) for data, headers in BODIES]
    assert await _faults(client, method, path, api, requests) == []
    for data, headers in BODIES:
        response = await client.request(method, path, data=data, headers=headers)
        # The embedding routes answer any JSON body with the 501 that says why (a generative model only); Ollama's
        # /api/pull answers a body Go's json.Decoder reads (7e8e76c: what follows the first value is never read)
        # with the 501 that says it pulls nothing.
        plain = b"Content-Encoding" not in str(headers).encode()
        readable = plain and data.startswith((b"[", b"null"))
        pulled = path == "/api/pull" and plain and _go_reads(data)
        assert 400 <= response.status < 500 or (
            response.status == 501 and (("embed" in path and readable) or pulled)), (data[:40], response.status)
    assert servicer.script.requests == []
