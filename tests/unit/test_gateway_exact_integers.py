"""Integers beyond 64 bits stay exact from the request body on, and a schema integer that constrained decoding would
change (const/enum beyond 2^53, bounds beyond 64 bits) is a 400 instead of output that breaks the schema."""
import json
import time

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.web import _parse

BIG = 123456789012345678901234567890
USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("number", [BIG, 2**64, -(2**63) - 1, 18446744073709551615, 9007199254740993])
def test_body_integers_stay_exact(number):
    body = _parse(b'{"a": [%d, 1.5, "12345678901234567890"], "b": {"c": %d}}' % (number, number))
    assert body == {"a": [number, 1.5, "12345678901234567890"], "b": {"c": number}}
    assert type(body["a"][0]) is int and type(body["b"]["c"]) is int


@pytest.mark.parametrize("raw", [b'{"a": NaN, "n": 12345678901234567890}',
                                 b'{"a": "\\ud800", "n": 12345678901234567890}', b'{"n": 1' + b"0" * 400 + b"}"])
def test_what_orjson_refuses_stays_refused(raw):
    with pytest.raises(InvalidRequest, match="not valid JSON"):
        _parse(raw)


def _message(param: str, key: str, number: int) -> str:
    return (f"{param} cannot be enforced by constrained decoding: the integer {number} in '{key}' is beyond what it "
            f"writes exactly (2^53 in const/enum, 64 bits in bounds)")


def _tool(parameters: dict) -> list:
    return [{"type": "function", "function": {"name": "f", "parameters": parameters}}]


V1_CASES = [
    ("response-format-const", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"id": {"const": BIG}}}}}},
     "response_format.json_schema.schema", "const", BIG),
    ("response-format-enum-2^53+1", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "enum": [1, 9007199254740993]}}}}, "response_format.json_schema.schema", "enum", 9007199254740993),
    ("guided-json-nested-const", {"guided_json": {"const": {"ids": [2**60]}}}, "guided_json", "const", 2**60),
    ("bound-beyond-64-bits", {"guided_json": {"type": "integer", "minimum": 2**64 - 5}}, "guided_json", "minimum",
     2**64 - 5),
    ("forced-tool-enum", {"tools": _tool({"type": "object", "properties": {"n": {"enum": [BIG]}}}),
                          "tool_choice": "required"}, "tools[0].function.parameters", "enum", BIG),
]


@pytest.mark.parametrize("extra,param,key,number", [c[1:] for c in V1_CASES], ids=[c[0] for c in V1_CASES])
async def test_v1_schema_integers_constrained_decoding_would_change_are_a_400(stack, extra, param, key, number):
    client, _ = stack
    response = await client.post("/v1/chat/completions", data=_dumps({"messages": USER, **extra}))
    assert response.status == 400
    assert orjson.loads(await response.read()) == {"error": {
        "message": _message(param, key, number), "type": "invalid_request_error", "param": param,
        "code": "unsupported_schema"}}


async def test_ollama_format_integer_beyond_2_53_is_a_400(stack):
    client, _ = stack
    body = {"model": "fake-model", "messages": USER, "stream": False, "format": {"enum": [BIG]}}
    response = await client.post("/api/chat", data=_dumps(body))
    assert response.status == 400
    assert orjson.loads(await response.read()) == {"error": _message("format", "enum", BIG)}


async def test_schema_integers_within_reach_are_enforced(stack):
    client, fake = stack
    schema = {"type": "object", "properties": {"id": {"const": 2**53}, "n": {"type": "integer", "maximum": 2**63 - 1}}}
    body = {"messages": USER, "guided_json": schema}
    response = await client.post("/v1/chat/completions", data=_dumps(body))
    assert response.status == 200
    assert '"const": 9007199254740992' in fake.script.requests[-1].constraint.grammar


async def test_ollama_tool_call_arguments_in_history_keep_their_integers(stack):
    client, fake = stack
    call = {"function": {"name": "f", "arguments": {"id": BIG}}}
    messages = [*USER, {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": "ok", "tool_name": "f"}]
    response = await client.post("/api/chat", data=_dumps({"model": "fake-model", "messages": messages,
                                                            "stream": False}))
    assert response.status == 200
    prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert str(BIG) in prompt and "e+29" not in prompt


def _dumps(body: dict) -> bytes:
    """JSON with exact big integers (orjson.dumps refuses integers beyond 64 bits)."""
    return json.dumps(body).encode()


def _fastest_s(fn, raw: bytes) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn(raw)
        times.append(time.perf_counter() - start)
    return min(times)


def test_a_big_prose_body_is_parsed_in_about_orjsons_time():
    # _parse holds the GIL in the gateway's CPU thread, so every stream and /health wait while it runs: finding the
    # integers orjson rounds by scanning the text for 19 digits took 3-4 times orjson's own parse of a 30 MB prompt
    # (six such bodies stalled a real stack's streams for 3.5 s). Measured against orjson on the same machine and moment.
    raw = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "word 12345 " * 2_700_000}]})
    assert _fastest_s(_parse, raw) < 2 * _fastest_s(orjson.loads, raw) + 0.03
