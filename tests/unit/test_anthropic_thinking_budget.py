"""Anthropic's thinking {"type": "enabled", "budget_tokens": N} bounds the reasoning to N tokens, then </think> (the
grammar vLLM's thinking_token_budget builds); it was accepted and ignored, so the model thought on to max_tokens.
budget_tokens is checked as Anthropic checks it: at least 1024, and less than max_tokens unless the anthropic-beta
header asks for interleaved thinking (fake scheduler; the tiny card and llguidance for the grammar)."""
import llguidance
import pytest

from gateway.anthropic_request import parse_messages
from tests.unit.test_anthropic_errors import BAD_MESSAGES, expect_error
from tests.unit.test_grammar_tools import card  # noqa: F401  (card is a fixture)

USER = [{"role": "user", "content": "Hi"}]
BASE = {"model": "fake-model", "max_tokens": 1800, "messages": USER}
TOO_SMALL = "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
NOT_BELOW = "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at"


def test_the_budget_forces_the_end_of_thinking(card):  # noqa: F811
    plan = parse_messages({**BASE, "model": "tiny", "thinking": {"type": "enabled", "budget_tokens": 1024}},
                          card, "tiny")
    assert plan.gen.thinking_open and plan.gen.constraint is not None
    grammar = llguidance.LLMatcher.grammar_from_lark(plan.gen.constraint.grammar)
    matcher = llguidance.LLMatcher(card.grammar_tokenizer(), grammar, log_level=0)
    thought = (card.encode(" Let me think about it.") * 300)[:1024]
    assert matcher.consume_tokens(thought)
    assert matcher.compute_ff_tokens() == [card.token_id("</think>")]


@pytest.mark.parametrize("thinking", [{"type": "adaptive"}, {"type": "disabled", "budget_tokens": 1024}, None])
def test_nothing_bounded_without_an_enabled_budget(card, thinking):  # noqa: F811
    body = {**BASE, "model": "tiny"} | ({"thinking": thinking} if thinking else {})
    assert parse_messages(body, card, "tiny").gen.constraint is None


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
@pytest.mark.parametrize("budget", [1, 1023])
async def test_a_budget_below_1024_is_refused(stack, path, budget):
    client, fake = stack
    body = {**BASE, "thinking": {"type": "enabled", "budget_tokens": budget}}
    await expect_error(await client.post(path, json=body), 400, BAD_MESSAGES, TOO_SMALL)
    assert fake.script.requests == []


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("budget", [1800, 4096])
async def test_a_budget_not_below_max_tokens_is_refused(stack, budget, stream):
    client, fake = stack
    body = {**BASE, "stream": stream, "thinking": {"type": "enabled", "budget_tokens": budget}}
    await expect_error(await client.post("/v1/messages", json=body), 400, BAD_MESSAGES, NOT_BELOW)
    assert fake.script.requests == []


async def test_interleaved_thinking_lets_the_budget_pass_max_tokens(stack):
    client, fake = stack
    body = {**BASE, "thinking": {"type": "enabled", "budget_tokens": 4096}}
    response = await client.post("/v1/messages", json=body,
                                 headers={"anthropic-beta": "interleaved-thinking-2025-05-14"})
    assert response.status == 200, await response.text()
    answer = await response.json()
    assert answer["type"] == "message" and answer["stop_reason"] == "end_turn"
    assert "reasoning[max_tokens=4096]" in fake.script.requests[-1].constraint.grammar


async def test_the_budget_reaches_the_scheduler(stack):
    client, fake = stack
    body = {**BASE, "thinking": {"type": "enabled", "budget_tokens": 1500}}
    response = await client.post("/v1/messages", json=body)
    answer = await response.json()
    assert response.status == 200 and answer["type"] == "message", answer
    assert "reasoning[max_tokens=1500]" in fake.script.requests[-1].constraint.grammar
