"""Fields OpenAI's API spec (openai/openai-openapi openapi.yaml) lists as required in a response body are there, null
where the spec makes them nullable: a chat message's refusal (ChatCompletionResponseMessage), a choice's logprobs
object's content and refusal (CreateChatCompletionResponse, CreateChatCompletionStreamResponse), and the Responses
API usage's input_tokens_details.cache_write_tokens (ResponseUsage; the openai SDK types it int), and each function
tool the Response repeats: type, name, strict and parameters (FunctionTool), null where the request left them out, as
vLLM's echo of its FunctionTool model has them. OpenAI sends "refusal": null on every message and logprobs object, and
vLLM's ChatMessage carries refusal (null); clients built from the spec (generated Java / Kotlin / Swift models that check required keys) refuse a body without them."""
import orjson
import pytest
from jsonschema import Draft202012Validator

REPLY = "<think>\nhmm\n</think>\n\nHello world"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
USER = [{"role": "user", "content": "Hi"}]

_NULLABLE_STRING = {"type": ["string", "null"]}
_LOGPROBS = {"anyOf": [{"type": "null"}, {"type": "object", "required": ["content", "refusal"], "properties": {
    "content": {"type": ["array", "null"]}, "refusal": {"type": ["array", "null"]}}}]}
# The spec's required keys (and their nullability) on the paths these tests reach.
CHAT = {"type": "object", "required": ["id", "object", "created", "model", "choices"], "properties": {"choices": {
    "type": "array", "items": {"type": "object", "required": ["finish_reason", "index", "message", "logprobs"],
                               "properties": {"logprobs": _LOGPROBS, "message": {
                                   "type": "object", "required": ["role", "content", "refusal"],
                                   "properties": {"content": _NULLABLE_STRING, "refusal": _NULLABLE_STRING}}}}}}}
CHUNK = {"type": "object", "required": ["id", "object", "created", "model", "choices"], "properties": {"choices": {
    "type": "array", "items": {"type": "object", "required": ["delta", "finish_reason", "index"],
                               "properties": {"logprobs": _LOGPROBS}}}}}
RESPONSE_USAGE = {"type": "object", "required": ["input_tokens", "input_tokens_details", "output_tokens",
                                                 "output_tokens_details", "total_tokens"],
                  "properties": {"input_tokens_details": {"type": "object",
                                                          "required": ["cached_tokens", "cache_write_tokens"]}}}


def _errors(schema: dict, body: dict) -> list:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in Draft202012Validator(schema).iter_errors(body)]


def _chunks(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]


CHAT_CASES = {
    "plain": ({}, REPLY),
    "logprobs": ({"logprobs": True, "top_logprobs": 2}, REPLY),
    "n2 logprobs": ({"n": 2, "logprobs": True}, REPLY),
    "tool call": ({"tools": TOOLS, "enable_thinking": False}, CALL),
    "tool call logprobs": ({"tools": TOOLS, "enable_thinking": False, "logprobs": True}, CALL),
    "function_call": ({"functions": [TOOLS[0]["function"]], "enable_thinking": False}, CALL),
}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
@pytest.mark.parametrize("case", list(CHAT_CASES))
async def test_a_chat_answer_has_every_field_the_spec_requires(stack, path, case):
    client, fake = stack
    fields, fake.script.reply = CHAT_CASES[case]
    body = orjson.loads(await (await client.post(path, json={"messages": USER, **fields})).read())
    assert _errors(CHAT, body) == []
    for choice in body["choices"]:
        assert choice["message"]["refusal"] is None
        if "logprobs" in fields:
            assert choice["logprobs"]["refusal"] is None and choice["logprobs"]["content"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
@pytest.mark.parametrize("case", list(CHAT_CASES))
async def test_every_chat_chunk_has_every_field_the_spec_requires(stack, path, case):
    client, fake = stack
    fields, fake.script.reply = CHAT_CASES[case]
    raw = await (await client.post(path, json={"messages": USER, **fields, "stream": True})).read()
    chunks = _chunks(raw)
    assert chunks and [e for chunk in chunks for e in _errors(CHUNK, chunk)] == []
    with_logprobs = [c["logprobs"] for chunk in chunks for c in chunk["choices"] if c.get("logprobs")]
    assert bool(with_logprobs) == ("logprobs" in fields)
    assert all(entry["refusal"] is None for entry in with_logprobs)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_responses_usage_has_every_field_the_spec_requires(stack, stream):
    client, _ = stack
    raw = await (await client.post("/v1/responses", json={"input": "Hi", "stream": stream})).read()
    body = orjson.loads(raw) if not stream else next(
        e["response"] for e in _chunks(raw) if e["type"] == "response.completed")
    assert _errors(RESPONSE_USAGE, body["usage"]) == []
    assert body["usage"]["input_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": 0}


FUNCTION_TOOL = {"type": "object", "required": ["type", "name", "strict", "parameters"], "properties": {
    "description": _NULLABLE_STRING, "parameters": {"type": ["object", "null"]}, "strict": {"type": ["boolean", "null"]}}}
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather"},
                   {"type": "function", "name": "get_time", "description": "now", "strict": False,
                    "parameters": {"type": "object", "properties": {}}}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_responses_tools_echo_has_every_field_the_spec_requires(stack, stream):
    client, _ = stack
    raw = await (await client.post("/v1/responses", json={"input": "Hi", "stream": stream,
                                                          "tools": RESPONSES_TOOLS})).read()
    bodies = [orjson.loads(raw)] if not stream else [e["response"] for e in _chunks(raw) if "response" in e]
    for body in bodies:
        assert [e for tool in body["tools"] for e in _errors(FUNCTION_TOOL, tool)] == []
        assert body["tools"] == [{"type": "function", "name": "get_weather", "description": None, "parameters": None,
                                  "strict": None}, {**RESPONSES_TOOLS[1]}]
