"""vLLM's thinking_token_budget: at most N reasoning tokens, then only </think> may follow; the answer after it is
free (added tokens such as <tool_call> too) or what response_format / guided decoding asks; -1 or absent bounds
nothing, and thinking off has no reasoning to bound. It was logged as an unknown field and ignored, so the model
thought on until max_tokens (tiny card, the grammar run through llguidance as the worker runs it)."""
import llguidance
import pytest

from gateway.errors import InvalidRequest
from gateway.openai import parse_chat
from tests.unit.test_grammar_tools import card  # noqa: F401  (card is a fixture)

USER = [{"role": "user", "content": "hi"}]


def matcher(card, body: dict):  # noqa: F811
    plan = parse_chat({"messages": USER, **body}, card, "tiny")
    assert plan.gen.constraint is not None and plan.gen.constraint.kind == "lark"
    grammar = llguidance.LLMatcher.grammar_from_lark(plan.gen.constraint.grammar)
    return llguidance.LLMatcher(card.grammar_tokenizer(), grammar, log_level=0)


def allowed(card, m, text_or_ids) -> bool:  # noqa: F811
    ids = card.encode(text_or_ids) if isinstance(text_or_ids, str) else text_or_ids
    return m.validate_tokens(ids) == len(ids)


def test_budget_forces_the_end_of_thinking(card):  # noqa: F811
    m = matcher(card, {"thinking_token_budget": 3})
    think_end, eos = card.token_id("</think>"), card.eos_token_ids[0]
    thought = card.encode("Let me think about it")[:3]
    assert m.consume_tokens(thought)
    assert m.compute_ff_tokens() == [think_end]          # the budget is spent: </think> is all that may come
    assert m.consume_tokens([think_end] + card.encode("\n\nHello"))
    assert allowed(card, m, [card.token_id("<tool_call>")]) and allowed(card, m, [eos])


def test_reasoning_may_end_early(card):  # noqa: F811
    m = matcher(card, {"thinking_token_budget": 50})
    assert m.consume_tokens(card.encode("Short.") + [card.token_id("</think>")] + card.encode("Answer."))
    assert allowed(card, m, [card.eos_token_ids[0]])


def test_budget_zero_closes_the_thinking_at_once(card):  # noqa: F811
    assert matcher(card, {"thinking_token_budget": 0}).compute_ff_tokens() == [card.token_id("</think>")]


@pytest.mark.parametrize("extra, answer, wrong", [
    ({"response_format": {"type": "json_object"}}, '{"a": 1}', "Sure"),
    ({"guided_choice": ["yes", "no"]}, "yes", "maybe"),
], ids=["response_format", "guided_choice"])
def test_budget_bounds_the_reasoning_before_a_constrained_answer(card, extra, answer, wrong):  # noqa: F811
    m = matcher(card, {"thinking_token_budget": 2, **extra})
    assert m.consume_tokens(card.encode("Let me think")[:2])
    assert m.compute_ff_tokens()[:1] == [card.token_id("</think>")]
    m.consume_tokens([card.token_id("</think>")])
    assert allowed(card, m, answer) and not allowed(card, m, wrong)


@pytest.mark.parametrize("body", [{"thinking_token_budget": -1}, {"thinking_token_budget": None},
                                  {"thinking_token_budget": 5, "enable_thinking": False}],
                         ids=["unlimited", "null", "thinking off"])
def test_no_budget_no_grammar(card, body):  # noqa: F811
    assert parse_chat({"messages": USER, **body}, card, "tiny").gen.constraint is None


@pytest.mark.parametrize("value", [-2, "many", 1.5])
def test_bad_budget_is_a_400_naming_it(card, value):  # noqa: F811
    with pytest.raises(InvalidRequest) as error:
        parse_chat({"messages": USER, "thinking_token_budget": value}, card, "tiny")
    assert error.value.param == "thinking_token_budget"


async def test_a_forced_call_after_continued_thinking_has_no_reasoning_to_bound(stack):
    """A final message continued inside its thinking leaves the thinking open, but a forced call's grammar is the
    calls alone: there was no reasoning for the budget to bound, and the request was a 500 (AssertionError 'a grammar
    built with thinking open starts with the reasoning'). The call comes back, as without a budget."""
    client, fake = stack
    fake.script.reply = "<tool_call>\n<function=get>\n<parameter=q>\nx\n</parameter>\n</function>\n</tool_call>"
    tools = [{"type": "function", "function": {"name": "get", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}}}}]
    response = await client.post("/v1/chat/completions", json={
        "messages": USER + [{"role": "assistant", "content": "<think>\nLet me"}], "continue_final_message": True,
        "add_generation_prompt": False, "tools": tools, "tool_choice": "required", "thinking_token_budget": 3})
    assert response.status == 200, await response.text()
    choice = (await response.json())["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert [call["function"] for call in choice["message"]["tool_calls"]] == [{"name": "get", "arguments": '{"q":"x"}'}]
    assert "max_tokens=" not in fake.script.requests[0].constraint.grammar


@pytest.mark.parametrize("field", ["reasoning_budget_tokens", "thinking_budget_tokens"])
def test_llama_cpps_budget_fields_bound_the_reasoning(card, field):  # noqa: F811
    # llama.cpp's server reads them on /v1/chat/completions (tools/server/server-common.cpp: reasoning_budget_tokens,
    # else thinking_budget_tokens; -1 unrestricted, 0 ends the thinking at once); they were logged as unknown
    # fields and ignored, so the model thought on.
    think_end = card.token_id("</think>")
    assert matcher(card, {field: 0}).compute_ff_tokens() == [think_end]
    m = matcher(card, {field: 2})
    assert m.consume_tokens(card.encode("Let me think")[:2]) and m.compute_ff_tokens() == [think_end]
    assert parse_chat({"messages": USER, field: -1}, card, "tiny").gen.constraint is None
    # vLLM's own field wins; reasoning_budget_tokens wins over its older name, as llama.cpp reads them.
    assert matcher(card, {"thinking_token_budget": 0, field: 50}).compute_ff_tokens() == [think_end]
    newer = matcher(card, {"reasoning_budget_tokens": 0, "thinking_budget_tokens": 50})
    assert newer.compute_ff_tokens() == [think_end]


@pytest.mark.parametrize("value", [-2, "many"])
def test_a_bad_llama_cpp_budget_is_a_400_naming_it(card, value):  # noqa: F811
    with pytest.raises(InvalidRequest) as error:
        parse_chat({"messages": USER, "thinking_budget_tokens": value}, card, "tiny")
    assert error.value.param == "thinking_budget_tokens"


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


def test_a_call_may_end_the_bounded_reasoning(card):  # noqa: F811
    """Qwen3.5 writes its call inside <think> at times, and the reasoning split reads a call the thinking runs into as
    the answer: the budget's grammar refused <tool_call> there, and a call spelled in its characters had </think>
    forced into its arguments once the budget ran out (vllm#44676). With tools offered the token ends the reasoning;
    once the budget is spent it is </think> or a call."""
    call = card.encode("Need the weather.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                       "</parameter>\n</function>\n</tool_call>")
    m = matcher(card, {"thinking_token_budget": 40, "tools": TOOLS})
    assert m.consume_tokens(call) and allowed(card, m, [card.eos_token_ids[0]])
    m = matcher(card, {"thinking_token_budget": 3, "tools": TOOLS})
    assert m.consume_tokens(card.encode("Let me think")[:3])
    assert allowed(card, m, [card.token_id("</think>")]) and allowed(card, m, [card.token_id("<tool_call>")])
    assert not allowed(card, m, card.encode("a"))
    # Calls that are not read (tool_choice none) do not end it: </think> alone, as without tools.
    m = matcher(card, {"thinking_token_budget": 3, "tools": TOOLS, "tool_choice": "none"})
    assert m.consume_tokens(card.encode("Let me think")[:3])
    assert m.compute_ff_tokens() == [card.token_id("</think>")]
