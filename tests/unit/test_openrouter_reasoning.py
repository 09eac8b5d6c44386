"""OpenRouter's unified `reasoning` object on the chat routes (its docs, openrouter.ai/docs/use-cases/reasoning-tokens):
`effort` and `exclude` were honoured, `enabled` and `max_tokens` were taken and ignored, so {"enabled": false} still
thought and {"max_tokens": N} bounded nothing. Now `enabled` switches the thinking (below an explicit
chat_template_kwargs / enable_thinking, above the effort) and `max_tokens` is the reasoning budget, as vLLM's
thinking_token_budget (which wins when both are sent) (fake scheduler)."""
import pytest

REPLY = "Let me think.</think>\n\nHello world"
USER = [{"role": "user", "content": "hi"}]
PATHS = ["/v1/chat/completions", "/api/v0/chat/completions"]
ON = {"content": "Hello world", "reasoning_content": "Let me think."}
OFF = {"content": REPLY, "reasoning_content": None}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("extra, expected", [
    ({"reasoning": {"enabled": False}}, OFF),
    ({"reasoning": {"enabled": True}}, ON),
    ({"reasoning": {"enabled": True}, "reasoning_effort": "none"}, ON),
    ({"reasoning": {"enabled": False}, "chat_template_kwargs": {"enable_thinking": True}}, ON),
    ({"reasoning": {"enabled": True}, "enable_thinking": False}, OFF),
    ({"reasoning": {"enabled": None, "effort": "none"}}, OFF),
], ids=["off", "on", "over-effort-none", "under-kwargs", "under-enable_thinking", "null"])
async def test_enabled_switches_the_thinking(stack, path, extra, expected):
    client, fake = stack
    response = await client.post(path, json={"messages": USER, "max_tokens": 32, **extra})
    assert response.status == 200, await response.text()
    message = (await response.json())["choices"][0]["message"]
    assert {key: message.get(key) for key in expected} == expected, message
    prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert prompt.endswith("<think>\n\n</think>\n\n") == (expected is OFF)


@pytest.mark.parametrize("extra, budget", [
    ({"reasoning": {"max_tokens": 100}}, 100),
    ({"reasoning": {"max_tokens": 100}, "thinking_token_budget": 50}, 50),
], ids=["max_tokens", "thinking_token_budget-wins"])
async def test_max_tokens_is_the_reasoning_budget(stack, extra, budget):
    client, fake = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, "max_tokens": 32, **extra})
    assert response.status == 200 and (await response.json())["choices"][0]["message"]["content"] == "Hello world"
    assert f"reasoning[max_tokens={budget}]" in fake.script.requests[-1].constraint.grammar


async def test_max_tokens_must_be_a_count(stack):
    client, fake = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, "reasoning": {"max_tokens": -5}})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "reasoning.max_tokens" and fake.script.requests == []
