"""Deeply nested bodies and model output: a 400 in each API's error shape (or text), never a RecursionError 500.

A response_format schema 100 objects deep was a 500 `internal error: RecursionError(...)` on /v1 (jsonschema checks a
schema recursively), so was a forced tool's parameters, Ollama's `format`, an Anthropic `input_schema`, vLLM's
guided_json and a body re-read for its long integers (fake scheduler)."""
import json
import threading

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.tool_values import typed_value
from gateway.tools import parse_tool_calls
from gateway.web import MAX_BODY_DEPTH

TOKENIZER = build_tokenizer()
MESSAGE = '"messages": [{"role": "user", "content": "x"}]'


def _schema(levels: int) -> str:
    """An object schema of JSON depth 2 * levels + 1 (each level: the schema and its properties)."""
    return '{"type": "object", "properties": {"a": ' * levels + '{"type": "integer"}' + "}}" * levels


def _cases(levels: int) -> list:
    schema = _schema(levels)
    tool = '{"type": "function", "function": {"name": "f", "parameters": %s}}' % schema
    return [
        ("/v1/chat/completions", '{%s, "max_tokens": 3, "response_format": {"type": "json_schema", "json_schema": '
                                 '{"name": "x", "schema": %s}}}' % (MESSAGE, schema)),
        ("/v1/chat/completions", '{%s, "max_tokens": 3, "tools": [%s], "tool_choice": "required"}' % (MESSAGE, tool)),
        ("/v1/completions", '{"prompt": "x", "max_tokens": 3, "guided_json": %s}' % schema),
        ("/v1/chat/completions", '{%s, "seed": 1234567890123456789, "metadata": %s}' % (MESSAGE, schema)),
        ("/api/chat", '{"model": "fake-model", "stream": false, %s, "format": %s}' % (MESSAGE, schema)),
        ("/v1/messages", '{"model": "fake-model", "max_tokens": 3, %s, "tools": [{"name": "f", "input_schema": %s}], '
                         '"tool_choice": {"type": "any"}}' % (MESSAGE, schema)),
        ("/v1/responses", '{"model": "fake-model", "input": "x", "text": {"format": {"type": "json_schema", '
                          '"name": "x", "schema": %s}}}' % schema),
    ]


@pytest.fixture
async def stack():
    async with fake_gateway(FakeServing(TOKENIZER, max_context_len=4096)) as pair:
        yield pair


def _message(path: str, body: dict) -> str:
    if path == "/api/chat":
        return body["error"]
    assert (body.get("type") == "error") == (path == "/v1/messages")
    return body["error"]["message"]


@pytest.mark.parametrize("index", range(7))
async def test_a_body_nested_too_deep_is_a_400_in_the_routes_shape(stack, index):
    client, _ = stack
    path, body = _cases(100)[index]
    response = await client.post(path, data=body.encode())
    answer = orjson.loads(await response.read())
    assert response.status == 400, answer
    assert _message(path, answer) == (f"the request body nests objects and arrays more than {MAX_BODY_DEPTH} levels "
                                      f"deep; at most {MAX_BODY_DEPTH} are accepted")


@pytest.mark.parametrize("index", range(7))
async def test_a_schema_as_deep_as_the_limit_allows_is_served(stack, index):
    client, _ = stack
    path, body = _cases(28)[index]
    json.loads(body)
    response = await client.post(path, data=body.encode())
    assert response.status == 200, await response.text()


def _in_thread(function):
    """function() on a fresh thread, as the gateway's CPU pool runs it; its result or exception."""
    out = {}

    def run():
        try:
            out["value"] = function()
        except BaseException as exc:   # noqa: BLE001 - handed back to the test
            out["error"] = exc
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_a_model_value_nested_past_the_json_modules_depth_stays_text():
    deep = "[" * 1000 + "]" * 1000
    assert _in_thread(lambda: typed_value(deep, {"type": "array"})) == deep
    hermes = '<tool_call>{"name": "f", "arguments": {"a": %s}}</tool_call>' % deep
    assert _in_thread(lambda: parse_tool_calls(hermes, [])) is None
