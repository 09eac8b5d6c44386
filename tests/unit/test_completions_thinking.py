"""/v1/completions prompts that leave a <think> block open (a chat prompt rendered by the client, as RL and eval
harnesses send it): structured output and thinking_token_budget start after the thinking, as vLLM's reasoning parser
reads the prompt ids for them on every request (tiny card, the grammar run through llguidance as the worker runs it).
The constraint applied from the first token, inside the thinking, and the budget was logged as an unknown field."""
import llguidance
import pytest

from gateway.errors import InvalidRequest
from gateway.openai_completion import parse_completion
from gateway.structured import THINK_BODY
from tests.unit.test_grammar_tools import card  # noqa: F401  (card is a fixture)

OPEN = "<|im_start|>user\nIs the sky blue?<|im_end|>\n<|im_start|>assistant\n<think>\n"
CLOSED = OPEN + "ok\n</think>\n\n"


def matcher(card, body: dict):  # noqa: F811
    plan = parse_completion({"max_tokens": 64, **body}, card, "tiny")
    assert plan.gen.constraint is not None and plan.gen.constraint.kind == "lark"
    grammar = llguidance.LLMatcher.grammar_from_lark(plan.gen.constraint.grammar)
    return llguidance.LLMatcher(card.grammar_tokenizer(), grammar, log_level=0)


def allowed(card, m, text) -> bool:  # noqa: F811
    ids = card.encode(text)
    return m.validate_tokens(ids) == len(ids)


@pytest.mark.parametrize("extra, answer, wrong", [
    ({"guided_choice": ["yes", "no"]}, "yes", "maybe"),
    ({"response_format": {"type": "json_object"}}, '{"a": 1}', "Sure"),
    ({"structured_outputs": {"regex": "[0-9]+"}}, "42", "forty"),
], ids=["guided_choice", "response_format", "structured_outputs"])
@pytest.mark.parametrize("as_ids", [False, True], ids=["text", "ids"])
def test_a_prompt_that_opens_thinking_is_constrained_after_it(card, extra, answer, wrong, as_ids):  # noqa: F811
    prompt = card.encode(OPEN) if as_ids else OPEN
    m = matcher(card, {"prompt": prompt, **extra})
    assert allowed(card, m, "Let me see, maybe")       # the thinking is free
    assert m.consume_tokens(card.encode("Let me see") + [card.token_id("</think>")])
    assert allowed(card, m, answer) and not allowed(card, m, wrong)


@pytest.mark.parametrize("prompt", ["Is the sky blue? Answer:", CLOSED], ids=["plain", "closed-thinking"])
def test_a_prompt_without_open_thinking_is_constrained_at_once(card, prompt):  # noqa: F811
    m = matcher(card, {"prompt": prompt, "guided_choice": ["yes", "no"]})
    assert allowed(card, m, "yes") and not allowed(card, m, "Let")


def test_thinking_token_budget_bounds_a_completions_prompts_thinking(card):  # noqa: F811
    m = matcher(card, {"prompt": OPEN, "thinking_token_budget": 2})
    assert m.consume_tokens(card.encode("Let me think")[:2])
    assert m.compute_ff_tokens()[:1] == [card.token_id("</think>")]
    # Nothing to bound in a prompt that opens no thinking.
    assert parse_completion({"prompt": "Hi", "thinking_token_budget": 2}, card, "tiny").gen.constraint is None


def test_prompts_that_differ_in_open_thinking_cannot_share_a_constraint(card):  # noqa: F811
    with pytest.raises(InvalidRequest) as raised:
        parse_completion({"prompt": [OPEN, "Plain"], "guided_choice": ["yes", "no"]}, card, "tiny")
    assert raised.value.param == "prompt" and "separate requests" in raised.value.message
    # Without a constraint they are served as before.
    assert parse_completion({"prompt": [OPEN, "Plain"], "max_tokens": 4}, card, "tiny").gen.constraint is None


@pytest.mark.parametrize("path, body, reads_thinking", [
    ("/v1/completions", {"guided_choice": ["yes", "no"]}, True),
    ("/completion", {"json_schema": {"type": "object"}}, False),
    ("/api/v0/completions", {"response_format": {"type": "json_object"}}, False),
], ids=["vllm", "llama.cpp", "lmstudio"])
async def test_only_vllms_completions_read_the_prompts_thinking(stack, path, body, reads_thinking):
    """llama-server's /completion and LM Studio's completions read a raw prompt with no reasoning parser: their
    grammar starts at the first token, as before."""
    client, fake = stack
    response = await client.post(path, json={"model": "fake-model", "prompt": OPEN, "max_tokens": 4, **body})
    assert response.status == 200, await response.text()
    grammar = fake.script.requests[-1].constraint.grammar
    assert (f"start: {THINK_BODY} " in grammar) == reads_thinking


@pytest.mark.parametrize("field, value, param", [
    ("thinking_token_budget", "x", "thinking_token_budget"),
    ("thinking_token_budget", 1.5, "thinking_token_budget"),
    ("reasoning", 5, "reasoning"),
    ("reasoning", {"max_tokens": "x"}, "reasoning.max_tokens"),
], ids=["budget-str", "budget-float", "reasoning-int", "reasoning-budget-str"])
def test_reasoning_budgets_are_typed_as_on_chat(card, field, value, param):  # noqa: F811
    """Read untyped, `reasoning: 5` was an AttributeError (a 500) and a budget "x" reached the grammar (a 400 quoting
    Lark); chat's types now hold here too."""
    with pytest.raises(InvalidRequest) as raised:
        parse_completion({"prompt": OPEN, "max_tokens": 8, field: value}, card, "tiny")
    assert raised.value.param == param and "is not of type" in raised.value.message
    assert "constrained decoding" not in raised.value.message
