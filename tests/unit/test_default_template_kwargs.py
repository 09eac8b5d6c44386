"""SPARKINFER_DEFAULT_CHAT_TEMPLATE_KWARGS: the server's chat template variables under each request's, as vLLM's
--default-chat-template-kwargs (ChatParams.with_defaults); the way to turn thinking off for clients that cannot send
chat_template_kwargs (fake scheduler)."""
import pytest

from gateway.config import parse_config
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

OFF = {"enable_thinking": False}


async def _prompt(client, **extra) -> str:
    response = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                               "max_tokens": 1, "return_prompt_text": True, **extra})
    assert response.status == 200, await response.text()
    return (await response.json())["prompt_text"]


@pytest.mark.parametrize("extra, thinks", [({}, False), ({"chat_template_kwargs": {"enable_thinking": True}}, True),
                                           ({"reasoning_effort": "high"}, True), ({"enable_thinking": True}, True),
                                           ({"chat_template_kwargs": {"enable_thinking": None}}, False)],
                         ids=["default", "request-kwargs", "reasoning-effort", "enable-thinking", "null"])
async def test_server_defaults_sit_under_the_request(extra, thinks):
    # QwenLM/Qwen3#1286, waybarrios/vllm-mlx#394: a deployment turns Qwen's thinking off for every client with
    # vLLM's --default-chat-template-kwargs '{"enable_thinking": false}'. Before, no such setting: every request
    # that did not send chat_template_kwargs thought (its prompt ended with "<think>\n").
    async with fake_gateway(FakeServing(build_tokenizer()), default_chat_template_kwargs=OFF) as (client, _):
        prompt = await _prompt(client, **extra)
        assert prompt.endswith("<think>\n") == thinks, prompt
        assert prompt.endswith("</think>\n\n") == (not thinks), prompt


async def test_without_defaults_the_template_decides():
    async with fake_gateway(FakeServing(build_tokenizer())) as (client, _):
        assert (await _prompt(client)).endswith("<think>\n")


@pytest.mark.parametrize("value", ["{bad", "[1]", '{"messages": []}'])
def test_a_value_that_is_no_json_object_stops_the_start(value, monkeypatch, capsys):
    monkeypatch.setenv("SPARKINFER_DEFAULT_CHAT_TEMPLATE_KWARGS", value)
    with pytest.raises(SystemExit):
        parse_config([])
    assert "SPARKINFER_DEFAULT_CHAT_TEMPLATE_KWARGS" in capsys.readouterr().err


def test_the_variable_is_read_as_json(monkeypatch):
    monkeypatch.setenv("SPARKINFER_DEFAULT_CHAT_TEMPLATE_KWARGS", '{"enable_thinking": false}')
    assert parse_config([]).default_chat_template_kwargs == OFF
