"""Gateway over the fake scheduler: Anthropic's thinking {"type": "between_tools"} (the SDKs' ThinkingConfigBetweenTools,
which opencode and Fabric send for Claude Sonnet 5.5, where "disabled" is refused) thinks only between tool calls: no
thinking before the reply to a user's message, thinking when the turn goes on after tool results. It was a 400
"thinking.type: 'between_tools' is not one of ['enabled', 'disabled', 'adaptive']" on /v1/messages and count_tokens."""
import pytest

from tests.unit.anthropic_sse import accumulate, parse_events
from tests.unit.test_anthropic_messages import BASE, prompt_of

BETWEEN = {"type": "between_tools"}
TOOLS = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
TOOL_LOOP = [{"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                "input": {"city": "Paris"}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"}]}]


async def _served(client, fake, body: dict) -> dict:
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    whole = await response.json()
    streamed = accumulate(parse_events(await (await client.post("/v1/messages", json={**body, "stream": True})).read()))
    assert streamed["content"] == whole["content"]
    counted = await (await client.post("/v1/messages/count_tokens", json=body)).json()
    assert counted == {"input_tokens": whole["usage"]["input_tokens"]}
    return whole


async def test_a_reply_to_the_user_does_not_think(stack):
    client, fake = stack
    fake.script.reply = "Hello world"
    whole = await _served(client, fake, {**BASE, "thinking": BETWEEN})
    assert whole["content"] == [{"type": "text", "text": "Hello world"}]
    assert prompt_of(fake).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


@pytest.mark.parametrize("extra", [{}, {"role": "user", "content": "And tomorrow?"}], ids=["tool results", "a question"])
async def test_after_tool_results_it_thinks(stack, extra):
    client, fake = stack
    fake.script.reply = "It rains.</think>\n\nRain in Paris."
    messages = TOOL_LOOP + ([extra] if extra else [])
    whole = await _served(client, fake, {**BASE, "tools": TOOLS, "thinking": BETWEEN, "messages": messages})
    if extra:
        # A user's new question after the tool loop: no thinking before the reply to it.
        assert prompt_of(fake).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
        assert [block["type"] for block in whole["content"]] == ["text"]
    else:
        assert prompt_of(fake).endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n")
        assert [block["type"] for block in whole["content"]] == ["thinking", "text"]
        assert whole["content"][0]["thinking"] == "It rains."
