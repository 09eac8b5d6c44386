"""Unit tests: the gateway's grammars (forced tool calls, JSON output) compile in llguidance and accept the right text."""
import os

import llguidance
import orjson
import pytest

from gateway.chat import render_chat
from gateway.model import ModelCard
from gateway.openai import parse_chat
from gateway.structured import ANY_OBJECT, bounded_schema, json_grammar
from gateway.tool_grammar import tool_call_grammar
from gateway.tools import parse_tool_calls
from proto import pb

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(REPO, "models", "tiny")
CALC = {"type": "function", "function": {"name": "calculate", "parameters": {
    "type": "object", "properties": {"operation": {"type": "string", "enum": ["add", "sub"]},
                                     "x": {"type": "number"}, "y": {"type": "integer"},
                                     "note": {"type": "string", "maxLength": 5},
                                     "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["operation", "x", "y"]}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}
LED = {"type": "function", "function": {"name": "switch_led_on", "parameters": {"type": "object", "properties": {}}}}
TOOLS = [CALC, WEATHER, LED]


@pytest.fixture(scope="module")
def card():
    if not os.path.isfile(os.path.join(TINY, "tokenizer.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    with open(os.path.join(TINY, "tokenizer.json"), "rb") as f:
        tokenizer_json = f.read()
    with open(os.path.join(REPO, "worker", "assets", "chat_template.jinja"), encoding="utf-8") as f:
        template = f.read()
    return ModelCard.from_info(pb.InfoResponse(model_id="tiny", max_context_len=8192, tokenizer_json=tokenizer_json,
                                               chat_template=template, eos_token_ids=[1017, 1015], vocab_size=1024))


def accepts(card, grammar: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(card.grammar_tokenizer(), llguidance.LLMatcher.grammar_from_lark(grammar),
                                   log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    return matcher.consume_tokens(card.encode(text)) and matcher.is_accepting()


def call(name, **params) -> str:
    """A call exactly as the chat template renders an assistant tool call."""
    message = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": params}}]}
    text = render_chat(TEMPLATE_CARD.template, [message], add_generation_prompt=False)
    return text[text.index("<tool_call>"):].removesuffix("<|im_end|>\n")


TEMPLATE_CARD = None


@pytest.fixture(scope="module", autouse=True)
def template_card(card):
    global TEMPLATE_CARD
    TEMPLATE_CARD = card


@pytest.mark.parametrize("text, parallel, ok", [
    (lambda: call("calculate", operation="add", x=1.5, y=-2), False, True),
    (lambda: call("calculate", operation="sub", x=3, y=4, note="hi", tags=["a", "b"]), False, True),
    (lambda: call("get_weather", location="Paris\nFrance"), False, True),
    (lambda: call("switch_led_on"), False, True),
    (lambda: call("get_weather", location="Paris") + "\n" + call("switch_led_on"), True, True),
    (lambda: call("get_weather", location="Paris") + "\n" + call("switch_led_on"), False, False),
    (lambda: "Sure! " + call("switch_led_on"), False, False),
    (lambda: call("calculate", operation="mod", x=1, y=2), False, False),
    (lambda: call("calculate", operation="add", x=1), False, False),
    (lambda: call("calculate", operation="add", x=1, y=2.5), False, False),
    (lambda: call("calculate", operation="add", x=1, y=2, note="toolong"), False, False),
    (lambda: call("get_weather", location="std::vector<int> v; if (a < b) {} <br/>"), False, True),
    (lambda: call("get_weather", location="a</parameter>b"), False, False),
    (lambda: call("get_weather", city="Paris"), False, False),
    (lambda: call("nope"), False, False),
], ids=["numbers", "optional-json-params", "multiline-string", "no-params", "parallel-two", "single-refuses-two",
        "prose-first", "enum", "missing-required", "integer", "maxLength", "markup-in-string", "closing-tag-in-string",
        "unknown-param", "unknown-function"])
def test_tool_grammar_accepts_only_valid_calls(card, text, parallel, ok):
    grammar = tool_call_grammar(TOOLS, None, parallel, card)
    assert accepts(card, grammar, text()) is ok


def test_named_choice_allows_only_that_function(card):
    grammar = tool_call_grammar(TOOLS, "get_weather", True, card)
    assert accepts(card, grammar, call("get_weather", location="Oslo"))
    assert not accepts(card, grammar, call("switch_led_on"))


def test_named_choice_is_exactly_one_call_even_with_parallel_calls(card):
    """OpenAI's named tool_choice calls that function once (vLLM's grammar for it is one JSON object); a sampled
    turn wrote two calls to it while parallel_tool_calls was left at its default."""
    two = call("get_weather", location="Oslo") + "\n" + call("get_weather", location="Rome")
    assert not accepts(card, tool_call_grammar(TOOLS, "get_weather", True, card), two)
    assert accepts(card, tool_call_grammar(TOOLS, None, True, card), two)


def test_accepted_calls_parse_back_to_their_arguments(card):
    text = call("calculate", operation="add", x=1.5, y=-2, tags=["a"]) + "\n" + call("switch_led_on")
    assert accepts(card, tool_call_grammar(TOOLS, None, True, card), text)
    calls = parse_tool_calls(text, TOOLS)
    assert [(c["function"]["name"], orjson.loads(c["function"]["arguments"])) for c in calls] == [
        ("calculate", {"operation": "add", "x": 1.5, "y": -2, "tags": ["a"]}), ("switch_led_on", {})]


def test_default_string_bound_is_configurable(card, monkeypatch):
    monkeypatch.setenv("SPARKINFER_GRAMMAR_MAX_STRING", "4")
    grammar = tool_call_grammar([WEATHER], None, False, card)
    assert accepts(card, grammar, call("get_weather", location="Oslo"))
    assert not accepts(card, grammar, call("get_weather", location="Paris"))


def test_bounded_schema_only_narrows_a_copy():
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "enum": ["x"]}},
              "$defs": {"s": {"type": "string"}}}
    bounded = bounded_schema(schema, 7)
    assert bounded["properties"]["a"]["maxLength"] == 7 and "maxLength" not in bounded["properties"]["b"]
    assert bounded["additionalProperties"] is False and bounded["$defs"]["s"]["maxLength"] == 7
    assert "maxLength" not in schema["properties"]["a"] and "additionalProperties" not in schema


@pytest.mark.parametrize("thinking_open, text, ok", [
    (False, '{"a": 1, "b": [true, null]}', True),
    (False, '{"a":1}', False),
    (False, "[1]", False),
    (True, 'Let me think.\n</think>\n\n{"a": "x"}', True),
    (True, '{"a": "x"}', False),
], ids=["compact-object", "no-space-style", "not-an-object", "after-reasoning", "reasoning-must-close"])
def test_json_grammar(card, thinking_open, text, ok):
    assert accepts(card, json_grammar({"type": "object"}, thinking_open, card), text) is ok


def test_parse_chat_forces_thinking_off_for_tool_choice(card):
    body = {"messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER], "tool_choice": "required"}
    plan = parse_chat(body, card, "tiny")
    assert card.decode(plan.gen.prompt_ids).endswith("<think>\n\n</think>\n\n")
    assert plan.forced_tools and plan.gen.constraint.kind == "lark" and not plan.gen.thinking_open
    free = parse_chat({**body, "tool_choice": "auto"}, card, "tiny")
    assert free.gen.constraint is None and free.gen.thinking_open


def test_any_object_grammar_bounds_keys_and_strings(card, monkeypatch):
    monkeypatch.setenv("SPARKINFER_GRAMMAR_MAX_STRING", "4")
    grammar = json_grammar(ANY_OBJECT, False, card)
    assert accepts(card, grammar, '{"abcd": ["wxyz", {"k": null}], "n": -1.5}')
    assert not accepts(card, grammar, '{"abcde": 1}')
    assert not accepts(card, grammar, '{"a": "vwxyz"}')


def test_anchored_pattern_is_enforced_on_raw_strings(card):
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"day": {"type": "string", "pattern": "^\\d{4}-\\d{2}$"}}, "required": ["day"]}}}
    grammar = tool_call_grammar([tool], None, False, card)
    assert accepts(card, grammar, call("f", day="2026-11"))
    assert not accepts(card, grammar, call("f", day="Nov 2026"))


def test_string_cap_never_goes_below_the_schemas_minlength(card, monkeypatch):
    # With the cap at 4, a schema asking for at least 6 characters was refused ("minLength 6 > maxLength 4", a
    # maxLength the client never wrote); the cap only bounds what the schema leaves open.
    monkeypatch.setenv("SPARKINFER_GRAMMAR_MAX_STRING", "4")
    assert bounded_schema({"type": "string", "minLength": 6}, 4)["maxLength"] == 6
    grammar = json_grammar({"type": "object", "properties": {"s": {"type": "string", "minLength": 6}}}, False, card)
    assert accepts(card, grammar, '{"s": "abcdef"}') and not accepts(card, grammar, '{"s": "abcdefg"}')
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"s": {"type": "string", "minLength": 6}}, "required": ["s"]}}}
    grammar = tool_call_grammar([tool], None, False, card)
    assert accepts(card, grammar, call("f", s="abcdef")) and not accepts(card, grammar, call("f", s="abcde"))


async def test_schema_with_minlength_past_the_cap_is_served(stack):
    client, fake = stack
    body = {"messages": [{"role": "user", "content": "essay"}], "max_tokens": 2,
            "response_format": {"type": "json_schema", "json_schema": {"name": "essay", "schema": {
                "type": "object", "properties": {"text": {"type": "string", "minLength": 2000}}}}}}
    response = await client.post("/v1/chat/completions", data=orjson.dumps(body))
    answer = orjson.loads(await response.read())
    assert response.status == 200, answer
    assert answer["choices"][0]["finish_reason"] == "length"
    assert '"minLength": 2000, "maxLength": 2000' in fake.script.requests[-1].constraint.grammar


@pytest.mark.parametrize("x, ok", [("4.69e+58", True), ("-0.25", True), ("8e691", False), ("1e308", False)])
def test_forced_plain_number_is_a_finite_double(card, x, ok):
    """A plain number parameter's exponent has at most 2 digits: the tiny model wrote 8e691, which no double holds,
    and the call's arguments came back as the string "8e691"."""
    grammar = tool_call_grammar([CALC], "calculate", False, card)
    text = f"<tool_call>\n<function=calculate>\n<parameter=operation>\nadd\n</parameter>\n<parameter=x>\n{x}\n" \
           "</parameter>\n<parameter=y>\n2\n</parameter>\n</function>\n</tool_call>"
    assert accepts(card, grammar, text) is ok


@pytest.mark.parametrize("points, ok", [("[1.5, 123456789012345678, -0.25]", True), ("[648e613]", False),
                                        ("[-7e54135022643151]", False), ("[123456789012345678901234]", False)])
def test_json_number_is_a_finite_double(card, points, ok):
    """An unbounded JSON number in a grammar is an integer of at most 18 digits or a decimal within 1e15 (llguidance's
    own number takes any exponent); with minimum / maximum the schema bounds it itself."""
    assert accepts(card, json_grammar({"type": "array", "items": {"type": "number"}}, False, card), points) is ok
    bounded = {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 10}}
    assert accepts(card, json_grammar(bounded, False, card), "[2.5]")
