"""Unit tests: tool parameters with `$defs` refs under forced tool_choice, and tool-call argument values kept exact
(integers beyond 64 bits, non-JSON constants) from the model's text to OpenAI arguments and back into the prompt."""
import json

import orjson
import pytest

from gateway.chat import compile_template, render_chat
from gateway.errors import InvalidRequest
from gateway.fake_scheduler import read_template
from gateway.openai import parse_chat
from gateway.tool_grammar import tool_call_grammar
from gateway.tools import parse_tool_calls
from tests.unit.test_grammar_tools import accepts, card  # noqa: F401  (card is a fixture)

# The shape pydantic writes for a nested model argument (vllm-project/vllm#20470, sgl-project/sglang#31692).
POINT_DEFS = {"Point": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                        "required": ["x", "y"], "additionalProperties": False},
              "Unit": {"type": "string", "enum": ["m", "km"]}}
MOVE = {"type": "function", "function": {"name": "move", "parameters": {
    "$defs": POINT_DEFS, "type": "object",
    "properties": {"to": {"$ref": "#/$defs/Point"}, "unit": {"$ref": "#/$defs/Unit"},
                   "via": {"type": "array", "items": {"$ref": "#/$defs/Point"}, "maxItems": 2}},
    "required": ["to", "unit"]}}}
LEGACY = {"type": "function", "function": {"name": "legacy", "parameters": {
    "definitions": {"N": {"type": "integer"}}, "type": "object",
    "properties": {"n": {"$ref": "#/definitions/N"}}, "required": ["n"]}}}
COUNT = {"type": "function", "function": {"name": "count", "parameters": {
    "type": "object", "properties": {"n": {"type": "integer"}, "xs": {"type": "array", "items": {"type": "integer"}},
                                     "r": {"type": "number"}}}}}
BIG = 52353800001386185000          # beyond 64 bits: orjson would read it as 5.2353800001386185e+19


def move_call(to: str, unit: str, via: str = "") -> str:
    via_param = f"<parameter=via>\n{via}\n</parameter>\n" if via else ""
    return (f"<tool_call>\n<function=move>\n<parameter=to>\n{to}\n</parameter>\n<parameter=unit>\n{unit}\n"
            f"</parameter>\n{via_param}</function>\n</tool_call>")


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "move"}}])
def test_forced_choice_with_defs_refs_is_accepted(card, choice):
    body = {"messages": [{"role": "user", "content": "go"}], "tools": [MOVE, LEGACY], "tool_choice": choice}
    plan = parse_chat(body, card, "tiny")
    assert plan.forced_tools and plan.gen.constraint.kind == "lark"


def test_defs_refs_are_enforced_in_the_grammar(card):
    grammar = tool_call_grammar([MOVE, LEGACY], None, False, card)
    assert accepts(card, grammar, move_call('{"x": 1, "y": -2}', '"km"', '[{"x": 3, "y": 4}]'))
    assert not accepts(card, grammar, move_call('{"x": 1}', '"km"'))            # Point needs y
    assert not accepts(card, grammar, move_call('{"x": 1, "y": 2}', '"mi"'))    # Unit enum
    legacy = "<tool_call>\n<function=legacy>\n<parameter=n>\n{}\n</parameter>\n</function>\n</tool_call>"
    assert accepts(card, grammar, legacy.format("7")) and not accepts(card, grammar, legacy.format("7.5"))


def test_ref_arguments_parse_to_their_json_values(card):
    calls = parse_tool_calls(move_call('{"x": 1, "y": -2}', '"km"'), [MOVE])
    assert json.loads(calls[0]["function"]["arguments"]) == {"to": {"x": 1, "y": -2}, "unit": "km"}


def test_integers_beyond_64_bits_stay_exact_integers():
    text = (f"<tool_call>\n<function=count>\n<parameter=n>\n{BIG}\n</parameter>\n<parameter=xs>\n[0, {BIG}]\n"
            f"</parameter>\n<parameter=r>\n1.5\n</parameter>\n</function>\n</tool_call>")
    arguments = parse_tool_calls(text, [COUNT])[0]["function"]["arguments"]
    assert arguments == f'{{"n":{BIG},"xs":[0,{BIG}],"r":1.5}}'
    assert json.loads(arguments) == {"n": BIG, "xs": [0, BIG], "r": 1.5}


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "1e999", '"\\ud800"'])
def test_values_that_are_not_strict_json_stay_text(raw):
    text = f"<tool_call>\n<function=count>\n<parameter=r>\n{raw}\n</parameter>\n</function>\n</tool_call>"
    arguments = parse_tool_calls(text, [COUNT])[0]["function"]["arguments"]
    assert orjson.loads(arguments) == {"r": raw}     # valid JSON text the response writer can send


def test_history_arguments_render_with_exact_integers():
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "count", "arguments": f'{{"n": {BIG}}}'}}]}
    prompt = render_chat(compile_template(read_template()), [{"role": "user", "content": "hi"}, message])
    assert f"<parameter=n>\n{BIG}\n</parameter>" in prompt


def _one_param_call(value: str) -> str:
    return f"<tool_call>\n<function=code>\n<parameter=c>\n{value}\n</parameter>\n</function>\n</tool_call>"


@pytest.mark.parametrize("bounds, ok, too_long, too_short", [
    ({"maxLength": 3}, "abc", "abcd", None),
    ({"minLength": 2, "maxLength": 4}, "ab", "abcde", "a"),
    ({}, "a" * 8, "a" * 9, None),                    # no maxLength: the grammar's string limit (8 here)
])
def test_anchored_pattern_keeps_the_length_bounds(card, monkeypatch, bounds, ok, too_long, too_short):
    monkeypatch.setenv("SPARKINFER_GRAMMAR_MAX_STRING", "8")
    tool = {"type": "function", "function": {"name": "code", "parameters": {
        "type": "object", "properties": {"c": {"type": "string", "pattern": "^[a-z]+$", **bounds}}, "required": ["c"]}}}
    grammar = tool_call_grammar([tool], None, False, card)
    assert accepts(card, grammar, _one_param_call(ok))
    assert not accepts(card, grammar, _one_param_call(too_long))
    assert not accepts(card, grammar, _one_param_call("ab1"))          # the pattern still holds
    if too_short is not None:
        assert not accepts(card, grammar, _one_param_call(too_short))


@pytest.mark.parametrize("schema", [{"type": "string", "enum": [1, 2]}, {"type": "string", "enum": []},
                                    {"type": "string", "minLength": 5, "maxLength": 2},
                                    {"type": "string", "pattern": "^[a-z]+$", "minLength": 5, "maxLength": 2}])
def test_unsatisfiable_string_parameter_is_a_400_not_a_wrong_call(card, schema):
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": schema}, "required": ["a"]}}}
    body = {"messages": [{"role": "user", "content": "go"}], "tools": [tool], "tool_choice": "required"}
    with pytest.raises(InvalidRequest) as info:
        parse_chat(body, card, "tiny")
    assert info.value.status == 400 and "no call can satisfy it" in info.value.message


# Parameters that list their properties in allOf branches: a $ref'd base and its extension (OpenAPI inheritance, zod's
# .and()); a forced call read no `properties` there and came back as {} without its required parameters.
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {
    "$defs": {"Page": {"type": "object", "properties": {"limit": {"type": "integer"}}, "required": ["limit"]}},
    "allOf": [{"$ref": "#/$defs/Page"},
              {"type": "object", "properties": {"query": {"type": "string", "maxLength": 8}}, "required": ["query"]}]}}}


def search_call(*params: tuple) -> str:
    body = "".join(f"<parameter={name}>\n{value}\n</parameter>\n" for name, value in params)
    return f"<tool_call>\n<function=search>\n{body}</function>\n</tool_call>"


def test_all_of_parameters_are_called_with_every_branchs_properties(card):
    grammar = tool_call_grammar([SEARCH], None, False, card)
    assert accepts(card, grammar, search_call(("limit", "5"), ("query", "cats")))
    assert not accepts(card, grammar, search_call(("query", "cats")))                    # limit is required
    assert not accepts(card, grammar, search_call(("limit", "five"), ("query", "cats")))  # an integer
    assert not accepts(card, grammar, "<tool_call>\n<function=search>\n</function>\n</tool_call>")


def test_all_of_parameters_are_typed_by_their_branch(card):
    calls = parse_tool_calls(search_call(("limit", "5"), ("query", "7")), [SEARCH])
    assert json.loads(calls[0]["function"]["arguments"]) == {"limit": 5, "query": "7"}


def _named(parameter: str) -> dict:
    return {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {parameter: {"type": "integer"}}, "required": [parameter]}}}


@pytest.mark.parametrize("parameter", ["a>b", "x\ny", "", " padded"], ids=["gt", "newline", "empty", "space"])
def test_a_parameter_name_the_markup_cannot_carry_is_a_400(card, parameter):
    """The forced-call grammar wrote <parameter=a>b>, read back as {"a": "b>\\n7"}, and an empty name gave no call at
    all (an empty message, finish_reason stop, for tool_choice required)."""
    body = {"messages": [{"role": "user", "content": "go"}], "tools": [_named(parameter)], "tool_choice": "required"}
    with pytest.raises(InvalidRequest) as error:
        parse_chat(body, card, "tiny")
    assert error.value.param == "tools" and f"parameter {json.dumps(parameter)} of 'f' cannot be written" in str(
        error.value)


@pytest.mark.parametrize("parameter", ["user id", "a.b", "日本", "a=b"])
def test_other_parameter_names_are_called_as_they_are(card, parameter):
    grammar = tool_call_grammar([_named(parameter)], None, False, card)
    assert accepts(card, grammar, f"<tool_call>\n<function=f>\n<parameter={parameter}>\n7\n</parameter>\n</function>\n"
                                  f"</tool_call>")


def test_a_parameter_whose_schema_is_false_is_never_written(card):
    """JSON Schema's false admits no value: the forced call wrote it as any JSON ({"a": false, "b": 0},
    {"a": -52.46, "b": 3}), arguments the tool's own schema refuses; required, no call can satisfy it."""
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": False, "b": {"type": "integer"}}, "required": ["b"]}}}
    grammar = tool_call_grammar([tool], None, False, card)
    call = "<tool_call>\n<function=f>\n{}<parameter=b>\n3\n</parameter>\n</function>\n</tool_call>"
    assert accepts(card, grammar, call.format(""))
    assert not accepts(card, grammar, call.format("<parameter=a>\n1\n</parameter>\n"))
    tool["function"]["parameters"]["required"] = ["a", "b"]
    body = {"messages": [{"role": "user", "content": "go"}], "tools": [tool], "tool_choice": "required"}
    with pytest.raises(InvalidRequest) as error:
        parse_chat(body, card, "tiny")
    assert "parameter 'a' of 'f' is required but its schema is false" in str(error.value)
