"""What a request may hand the chat template (fake scheduler): chat_template_kwargs never collide with the variables
the server sets (a 400, not a 500), and a request's own chat_template runs only when the server trusts them."""
import time

import orjson
import pytest

from gateway.config import parse_config
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def with_specials():
    """The stack with a tokenizer_config that names special tokens (eos_token, pad_token), as real checkpoints do."""
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    info = await fake.Info(None, None)
    config = orjson.dumps({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
    fake.Info = _answer(type(info)(**{**_fields(info), "tokenizer_config_json": config}))
    async with fake_gateway(fake) as pair:
        yield pair


def _fields(info) -> dict:
    return {field.name: getattr(info, field.name) for field in info.DESCRIPTOR.fields}


def _answer(info):
    async def Info(request, context):  # noqa: N802 - the gRPC method name
        return info
    return Info


@pytest.mark.parametrize("key", ["messages", "tools", "add_generation_prompt", "eos_token", "pad_token"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions", "/v1/tokenize"])
async def test_template_kwargs_the_server_sets_are_a_400(with_specials, path, key):
    client, fake = with_specials
    body = {"messages": USER, "chat_template_kwargs": {key: "x"}}
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 400
    assert orjson.loads(await response.read()) == {"error": {
        "message": f"chat_template_kwargs.{key} cannot be set: the server passes '{key}' to the chat template itself "
                   f"(from the request's messages, tools and add_generation_prompt and the tokenizer's special tokens)",
        "type": "invalid_request_error", "param": f"chat_template_kwargs.{key}", "code": "invalid_value"}}
    assert not fake.script.requests


async def test_other_template_kwargs_reach_the_template(with_specials):
    client, fake = with_specials
    body = {"messages": USER, "chat_template_kwargs": {"enable_thinking": False, "custom_flag": 1}, "max_tokens": 2}
    response = await client.post("/v1/chat/completions", data=orjson.dumps(body))
    assert response.status == 200
    prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert prompt.endswith("<think>\n\n</think>\n\n")


LOOPS = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions", "/v1/tokenize"])
async def test_request_chat_template_is_refused_unless_trusted(stack, path):
    client, fake = stack
    start = time.monotonic()
    response = await client.post(path, data=orjson.dumps({"messages": USER, "chat_template": LOOPS}))
    assert response.status == 400 and time.monotonic() - start < 2
    assert orjson.loads(await response.read()) == {"error": {
        "message": "chat_template: a template sent with the request is rendered only when the server trusts request "
                   "templates (SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE=1, as vLLM's --trust-request-chat-template)",
        "type": "invalid_request_error", "param": "chat_template", "code": "unsupported"}}
    assert not fake.script.requests


@pytest.mark.parametrize("argv,env,trusted", [([], {}, False), (["--trust-request-chat-template"], {}, True),
                                              ([], {"SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE": "1"}, True),
                                              ([], {"SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE": "0"}, False)])
def test_trust_request_chat_template_setting(monkeypatch, argv, env, trusted):
    monkeypatch.delenv("SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert parse_config(argv).trust_request_chat_template is trusted
