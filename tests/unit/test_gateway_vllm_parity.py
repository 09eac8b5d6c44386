"""Small vLLM-parity cases on /v1: requests vLLM accepts are answered, with the reply in the body."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TOKENIZER = build_tokenizer()


@pytest.fixture
async def stack():
    async with fake_gateway(FakeServing(TOKENIZER, max_context_len=2048)) as pair:
        yield pair


async def post(client, body):
    response = await client.post("/v1/chat/completions", data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def test_assistant_null_content_without_tool_calls_is_empty_content(stack):
    # vLLM's chat_utils reads an assistant content of None as no parts (""), tool_calls or not.
    client, _ = stack
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None},
                {"role": "user", "content": "again"}]
    status, body = await post(client, {"messages": messages, "max_tokens": 3})
    assert status == 200, body
    assert body["object"] == "chat.completion" and body["choices"][0]["message"]["role"] == "assistant"
    assert body["usage"]["completion_tokens"] >= 1


async def test_empty_stream_options_without_stream_is_accepted(stack):
    # vLLM's validate_stream_options refuses only a truthy stream_options when stream is not true.
    client, _ = stack
    base = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    for options in ({}, None):
        status, body = await post(client, {**base, "stream": False, "stream_options": options})
        assert status == 200, body
        assert body["object"] == "chat.completion" and "usage" in body
    status, body = await post(client, {**base, "stream": False, "stream_options": {"include_usage": True}})
    assert status == 400 and body["error"]["param"] == "stream_options"


@pytest.fixture
async def trusted():
    async with fake_gateway(FakeServing(TOKENIZER, max_context_len=2048), trust_request_chat_template=True) as pair:
        yield pair


async def test_null_content_reaches_a_request_chat_template_as_empty_string(trusted):
    # vLLM's chat_utils turns content None into no parts, which the template gets as "" (not undefined).
    client, _ = trusted
    template = "{% for m in messages %}[{{ m.role }}:{{ m.content is string }}:{{ m.content | length }}]{% endfor %}"
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": calls}]
    body = {"messages": messages, "chat_template": template, "add_generation_prompt": False}
    response = await client.post("/v1/tokenize", data=orjson.dumps(body))
    out = orjson.loads(await response.read())
    assert response.status == 200, out
    assert TOKENIZER.decode(out["tokens"], skip_special_tokens=False) == "[user:True:2][assistant:True:0]"
