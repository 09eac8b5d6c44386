"""Numbers and booleans sent as strings on the vLLM-shaped routes are read as vLLM's pydantic models read them
(lax mode), instead of a 400: Cline 3.34 sent its temperature as a string (cline#7183)."""
import orjson
import pytest

from gateway.pydantic_scalars import lax_scalars

CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False}
SCHEMA = {"type": "object", "properties": {
    "temperature": {"type": ["number", "null"]}, "max_tokens": {"type": ["integer", "null"]},
    "stream": {"type": ["boolean", "null"]}, "stop": {"anyOf": [{"type": "string"}, {"type": "array"}]},
    "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
    "ids": {"type": "array", "items": {"type": "integer"}}}}


@pytest.mark.parametrize("field,sent,read", [
    ("temperature", "0.7", 0.7), ("temperature", " 1e-1 ", 0.1), ("temperature", "2", 2.0),
    ("max_tokens", "512", 512), ("max_tokens", "+5.00", 5), ("stream", "true", True), ("stream", "Off", False),
    ("stream", 1, True), ("stream", 0, False), ("stream", 1.0, True), ("stream", 0.0, False),
    ("temperature", 1, 1), ("max_tokens", 0, 0), ("stop", "0.5", "0.5"), ("stream", 0.5, 0.5), ("stream", -1, -1),
    ("temperature", "warm", "warm"), ("temperature", "nan", "nan"), ("temperature", "inf", "inf"),
    ("max_tokens", "5.5", "5.5"), ("max_tokens", "1e3", "1e3"), ("stream", "maybe", "maybe"), ("stream", 2, 2),
    ("max_tokens", True, 1), ("max_tokens", False, 0), ("temperature", True, 1.0), ("temperature", False, 0.0),
    ("stream", True, True), ("stop", True, True), ("max_tokens", "9" * 4300, int("9" * 4300)),
    # pydantic refuses these (int_parsing_size past 4300 digits; ASCII digits only, no underscores), where Python's
    # int() raised ValueError on the first (a 500) and int() / float() read the others.
    ("max_tokens", "9" * 4301, "9" * 4301), ("max_tokens", "\u0663", "\u0663"), ("temperature", "\u0663", "\u0663"),
    ("temperature", "1_0", "1_0"), ("temperature", "\uff11", "\uff11"),
], ids=lambda v: repr(v)[:40])
def test_scalars_are_read_as_pydantic_reads_them(field, sent, read):
    """What pydantic's lax mode turns into the wanted type is that value; anything else stays as sent, for the
    schema to refuse (a string where a string is allowed is never touched)."""
    body = lax_scalars({field: sent}, SCHEMA)
    assert body[field] == read and type(body[field]) is type(read)


def test_nested_properties_and_items_are_read_too():
    body = lax_scalars({"stream_options": {"include_usage": "true"}, "ids": ["1", 2]}, SCHEMA)
    assert body == {"stream_options": {"include_usage": True}, "ids": [1, 2]}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
async def test_string_sampling_fields_reach_the_scheduler_as_numbers(stack, path):
    client, fake = stack
    body = {**CHAT, "temperature": "0.5", "top_p": "0.9", "max_tokens": "7", "seed": "42", "n": "1",
            "presence_penalty": "0", "logprobs": "true", "top_logprobs": "2", "stream": "false"}
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    answer = orjson.loads(await response.read())
    assert answer["choices"][0]["message"]["content"] == "Hello world"
    assert answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"] is not None
    sent = fake.script.requests[-1]
    assert sent.max_tokens == 7 and sent.sampling.top_p == pytest.approx(0.9)
    assert sent.sampling.temperature == pytest.approx(0.5) and sent.sampling.seed == 42


async def test_streamed_and_completions_read_them_the_same(stack):
    client, fake = stack
    response = await client.post("/v1/chat/completions", data=orjson.dumps(
        {**CHAT, "stream": "true", "stream_options": {"include_usage": "true"}, "max_tokens": "8"}))
    assert response.status == 200
    frames = [line[6:] for line in (await response.read()).decode().splitlines() if line.startswith("data: {")]
    assert orjson.loads(frames[-1])["usage"]["completion_tokens"] > 0
    response = await client.post("/v1/completions", data=orjson.dumps(
        {"model": "default", "prompt": "hi", "max_tokens": "3", "temperature": "0", "echo": "false"}))
    assert response.status == 200, await response.text()
    assert fake.script.requests[-1].max_tokens == 3


async def test_the_responses_api_reads_them_too(stack):
    client, fake = stack
    response = await client.post("/v1/responses", data=orjson.dumps(
        {"model": "default", "input": "hi", "max_output_tokens": "6", "temperature": "0.3", "store": "false"}))
    assert response.status == 200, await response.text()
    answer = orjson.loads(await response.read())
    assert answer["max_output_tokens"] == 6 and answer["temperature"] == pytest.approx(0.3)
    assert answer["store"] is False and fake.script.requests[-1].max_tokens == 6


@pytest.mark.parametrize("field,value", [("temperature", "warm"), ("max_tokens", "5.5"), ("stream", "maybe")])
async def test_a_string_that_spells_no_value_is_still_the_400_naming_the_field(stack, field, value):
    client, fake = stack
    response = await client.post("/v1/chat/completions", data=orjson.dumps({**CHAT, field: value}))
    body = orjson.loads(await response.read())
    assert response.status == 400 and body["error"]["param"] == field and body["error"]["code"] == "invalid_type"
    assert not fake.script.requests


@pytest.mark.parametrize("path, body, frame", [
    ("/v1/chat/completions", {**CHAT, "stream": 1, "stream_options": {"include_usage": 1}}, "chat.completion.chunk"),
    ("/api/v0/chat/completions", {**CHAT, "stream": 1}, "chat.completion.chunk"),
    ("/v1/completions", {"model": "default", "prompt": "hi", "max_tokens": 3, "stream": 1}, "text_completion"),
    ("/v1/responses", {"model": "default", "input": "hi", "stream": 1.0}, "response.completed"),
], ids=["chat", "lm studio chat", "completions", "responses"])
async def test_a_boolean_sent_as_0_or_1_is_read_as_pydantic_reads_it(stack, path, body, frame):
    """vLLM's request models (pydantic, lax) read "stream": 1 as true; it was a 400 "1 is not of type 'boolean'"."""
    client, fake = stack
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    assert response.content_type == "text/event-stream" and frame in (await response.read()).decode()


async def test_a_number_other_than_0_or_1_is_still_the_400_naming_the_boolean(stack):
    client, fake = stack
    response = await client.post("/v1/chat/completions", data=orjson.dumps({**CHAT, "stream": 2}))
    body = orjson.loads(await response.read())
    assert response.status == 400 and body["error"]["param"] == "stream"
    assert body["error"]["message"] == 'invalid value for \'stream\': 2 is not of type "boolean", "null"'
    assert not fake.script.requests


@pytest.mark.parametrize("path, body", [
    ("/v1/completions", {"model": "default", "prompt": "hi", "max_tokens": 2, "logprobs": True}),
    ("/api/v0/completions", {"model": "default", "prompt": "hi", "max_tokens": 2, "logprobs": True}),
    ("/v1/chat/completions", {**CHAT, "max_tokens": 2, "logprobs": True, "top_logprobs": True}),
], ids=["completions", "lm studio completions", "chat"])
async def test_a_boolean_sent_where_an_integer_is_wanted_is_read_as_pydantic_reads_it(stack, path, body):
    """vLLM's CompletionRequest.logprobs is an int that pydantic's lax mode reads true into 1 (llama-stack sends
    "logprobs": true to /v1/completions, ogx-ai/ogx#5253); it was a 400 "True is not of type 'integer', 'null'"."""
    client, fake = stack
    fake.script.top_ids = [5, 6, 7]
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    choice = orjson.loads(await response.read())["choices"][0]
    assert fake.script.requests[-1].sampling.num_logprobs == 1
    if "text" in choice:
        assert [len(top) for top in choice["logprobs"]["top_logprobs"]] == [2, 2]
    else:
        assert [len(entry["top_logprobs"]) for entry in choice["logprobs"]["content"]] == [1, 1]


async def test_a_boolean_output_limit_is_one_token_on_the_responses_api(stack):
    client, fake = stack
    response = await client.post("/v1/responses", data=orjson.dumps(
        {"model": "default", "input": "hi", "max_output_tokens": True, "temperature": False}))
    assert response.status == 200, await response.text()
    answer = orjson.loads(await response.read())
    assert answer["max_output_tokens"] == 1 and answer["temperature"] == 0.0
    assert fake.script.requests[-1].max_tokens == 1


@pytest.mark.parametrize("path, body, field", [
    ("/v1/chat/completions", {**CHAT, "max_tokens": "9" * 5000}, "max_tokens"),
    ("/v1/completions", {"model": "default", "prompt": "hi", "n": "9" * 5000}, "n"),
    ("/v1/responses", {"model": "default", "input": "hi", "max_output_tokens": "9" * 5000}, "max_output_tokens"),
    ("/v1/detokenize", {"model": "default", "tokens": [1, "9" * 5000]}, "tokens[1]"),
], ids=["chat", "completions", "responses", "detokenize"])
async def test_an_integer_string_of_more_digits_than_python_reads_is_the_400(stack, path, body, field):
    # int() raises ValueError past 4300 digits: it was a 500 "Exceeds the limit (4300 digits) for integer string
    # conversion" on every route that reads numbers sent as strings (llama.cpp's /completion too).
    client, fake = stack
    response = await client.post(path, data=orjson.dumps(body))
    answer = orjson.loads(await response.read())
    assert response.status == 400, answer
    assert (answer["error"]["param"], answer["error"]["code"]) == (field, "invalid_type")
    assert 'is not of type "integer"' in answer["error"]["message"], answer
    assert not fake.script.requests
