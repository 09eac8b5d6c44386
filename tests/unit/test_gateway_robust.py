"""Never a 500 for anything a client sends: every field of every /v1 body gets odd values (fake scheduler)."""
import json

import pytest

from gateway import openai_fields
from gateway.app import create_app
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig
from gateway.openai_schema import CHAT_SCHEMA, COMPLETION_SCHEMA
from gateway.fake_scheduler import FakeServing, build_tokenizer, start_fake_server, start_test_client

ODD = [None, True, 0, -1, 2**40, -2**70, 1.5, 3.0, 1e300, "x", "", [], [1], ["a"], {}, {"a": 1}, [{}], [None], "\x00"]
# Every field /v1 refuses, accepts without effect or honours beyond OpenAI's core: a check that reads one of them
# must never see a value of the wrong type (best_of "x" and typical_p "x" were a TypeError, a 500).
_EXTRA = sorted({*openai_fields.REFUSED, *openai_fields.NO_EFFECT, *openai_fields.HONOURED})
# Every field any /v1 generation route declares, sent to each of them: a field one route types and another reads
# untyped (reasoning and thinking_token_budget on /v1/completions: reasoning 5 was an AttributeError, a 500) is
# caught here, not only the fields a route lists for itself.
_V1_FIELDS = sorted({*CHAT_SCHEMA["properties"], *COMPLETION_SCHEMA["properties"], *openai_fields.CHAT_REFUSED,
                     *_EXTRA})
ROUTES = {
    "/v1/chat/completions": ({"messages": [{"role": "user", "content": "hi"}]}, _V1_FIELDS),
    "/v1/completions": ({"prompt": "hi"}, _V1_FIELDS),
    # Fields of other routes sent to /v1/responses are ignored, never compared (best_of "x" was a TypeError, a 500).
    "/v1/responses": ({"input": "hi"}, ["input", "max_output_tokens", "top_logprobs", *_V1_FIELDS]),
    "/v1/responses/input_tokens": ({"input": "hi"}, ["input", *_V1_FIELDS]),
    "/v1/tokenize": ({"prompt": "hi"}, ["messages", "prompt", "tools", "add_generation_prompt", "model"]),
    "/v1/detokenize": ({"tokens": [1]}, ["tokens"]),
    # The routes that render a chat body as /v1/chat/completions does get every chat field too (tool_choice and the
    # reasoning switches were read there untyped: `reasoning: 5` was a 500 on each).
    "/v1/tokenize#messages": ({"messages": [{"role": "user", "content": "hi"}]}, _V1_FIELDS),
    "/apply-template": ({"messages": [{"role": "user", "content": "hi"}]}, _V1_FIELDS),
    "/v1/score": ({"messages": [{"role": "user", "content": "hi"}], "completion": "yes"}, _V1_FIELDS),
}
MESSAGE_VALUES = ODD + [[{"type": "text"}], [{"type": "text", "text": 5}],
                        [{"function": {"name": "f", "arguments": "{bad"}}],
                        [{"function": {"name": "f", "arguments": {"a": [1]}}}]]


@pytest.fixture
async def client():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    fake.script.reply = "Hi"
    server, addr = await start_fake_server(fake)
    test_client = await start_test_client(create_app(GatewayConfig(scheduler_addr=addr), SchedulerClient(addr)))
    yield test_client
    await test_client.close()
    await server.stop(None)


async def _status(client, path, body) -> tuple:
    response = await client.post(path.split("#")[0], data=json.dumps(body))
    raw = await response.read()
    if response.status >= 400:
        # llama.cpp's error object (/apply-template) names a param only where there is one.
        assert set(json.loads(raw)["error"]) - {"param"} == {"message", "type", "code"}
    return response.status, raw[:200]


@pytest.mark.parametrize("path", list(ROUTES), ids=[p.strip("/").replace("/", "-").replace("#", "-") for p in ROUTES])
async def test_odd_field_values_never_give_a_server_error(client, path):
    base, fields = ROUTES[path]
    failures = []
    for field in fields:
        for value in ODD:
            status, raw = await _status(client, path, {**base, field: value})
            if status >= 500:
                failures.append((field, value, status, raw))
    assert failures == []


async def test_odd_message_fields_never_give_a_server_error(client):
    failures = []
    for key in ["role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content", "reasoning"]:
        for value in MESSAGE_VALUES:
            message = {"role": "user", "content": "hi", key: value}
            as_assistant = {**message, "role": "assistant"} if key != "role" else message
            for messages in ([message], [{"role": "user", "content": "q"}, as_assistant]):
                status, raw = await _status(client, "/v1/chat/completions", {"messages": messages})
                if status >= 500:
                    failures.append((key, value, status, raw))
    assert failures == []
