"""Gateway over the fake scheduler: /v1/messages' usage says how many of output_tokens were thinking, in
output_tokens_details.thinking_tokens as Anthropic reports it (the SDKs' OutputTokensDetails), which the Vercel AI
SDK's Anthropic provider and LiteLLM read as the answer's reasoning tokens; it was missing, so they read none. The
count is /v1's reasoning_tokens for the same answer (one generation path), streamed or not, displayed or not."""
import pytest

from tests.unit.anthropic_sse import accumulate, parse_events
from tests.unit.test_anthropic_messages import BASE, USER

REPLY = "Let me see this through.</think>\n\nHello world"


async def chat_reasoning_tokens(client) -> int:
    chat = {"model": "fake-model", "messages": USER, "max_tokens": 64}
    usage = (await (await client.post("/v1/chat/completions", json=chat)).json())["usage"]
    return usage["completion_tokens_details"]["reasoning_tokens"]


@pytest.mark.parametrize("thinking", [{"type": "adaptive"}, {"type": "adaptive", "display": "omitted"}],
                         ids=["shown", "omitted"])
async def test_thinking_tokens_are_the_reasoning_tokens(stack, thinking):
    client, fake = stack
    fake.script.reply = REPLY
    expected = await chat_reasoning_tokens(client)
    body = {**BASE, "thinking": thinking}
    whole = await (await client.post("/v1/messages", json=body)).json()
    events = parse_events(await (await client.post("/v1/messages", json={**body, "stream": True})).read())
    # message_start announces nothing generated yet (checked before accumulate fills its message in).
    assert events[0][1]["message"]["usage"]["output_tokens_details"] == {"thinking_tokens": 0}
    streamed = accumulate(events)
    assert 0 < expected < whole["usage"]["output_tokens"]
    assert whole["usage"]["output_tokens_details"] == {"thinking_tokens": expected}
    assert streamed["usage"] == whole["usage"]


async def test_an_answer_without_thinking_has_none(stack):
    client, fake = stack
    fake.script.reply = "Hello world"
    whole = await (await client.post("/v1/messages", json=BASE)).json()
    assert whole["usage"]["output_tokens_details"] == {"thinking_tokens": 0} and whole["usage"]["output_tokens"] == 3
