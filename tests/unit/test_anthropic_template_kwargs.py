"""Gateway over the fake scheduler: vLLM's chat_template_kwargs on /v1/messages and count_tokens reach the chat
template, as vLLM's Anthropic routes pass them (AnthropicMessagesRequest.chat_template_kwargs); they were ignored, so
{"enable_thinking": false} still thought. An explicit Anthropic `thinking` wins over them."""
import pytest

from tests.unit.test_anthropic_messages import USER, prompt_of

BASE = {"model": "fake-model", "max_tokens": 64, "messages": USER}
OFF = {"chat_template_kwargs": {"enable_thinking": False}}
CLOSED = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
OPEN = "<|im_start|>assistant\n<think>\n"


@pytest.mark.parametrize("change, thinks", [
    ({}, True), (OFF, False), ({**OFF, "thinking": {"type": "adaptive"}}, True),
    ({"chat_template_kwargs": {"enable_thinking": True}, "thinking": {"type": "disabled"}}, False),
], ids=["default", "kwargs off", "thinking wins on", "thinking wins off"])
async def test_chat_template_kwargs_reach_the_template(stack, change, thinks):
    client, fake = stack
    fake.script.reply = "Hello world"
    response = await client.post("/v1/messages", json={**BASE, **change})
    assert response.status == 200, await response.text()
    body = await response.json()
    assert prompt_of(fake).endswith(OPEN if thinks else CLOSED)
    kinds = [block["type"] for block in body["content"]]
    assert kinds == (["thinking"] if thinks else ["text"]), body
    counted = await client.post("/v1/messages/count_tokens", json={**BASE, **change})
    assert (await counted.json())["input_tokens"] == body["usage"]["input_tokens"]


async def test_a_variable_the_server_sets_is_a_400(stack):
    client, fake = stack
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        response = await client.post(path, json={**BASE, "chat_template_kwargs": {"messages": []}})
        body = await response.json()
        assert response.status == 400 and body["error"]["type"] == "invalid_request_error", body
        assert body["error"]["message"].startswith("chat_template_kwargs.messages cannot be set"), body
    assert fake.script.requests == []
