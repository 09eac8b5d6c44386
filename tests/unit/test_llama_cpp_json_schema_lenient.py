"""llama.cpp's json_schema (its /completion and /infill option, which its OpenAI routes take too) leaves a keyword its
grammar cannot enforce unenforced, as llama-server serves it: it builds the grammar with common/json-schema-to-grammar,
whose visit() skips every keyword it has no rule for. POST /completion {"prompt": "hi", "json_schema": {"type": "array",
"items": {"type": "string"}, "uniqueItems": true}} (pydantic's set[str]) was a 400 'json_schema cannot be enforced by
constrained decoding: Unimplemented keys: ["uniqueItems"]'. vLLM's fields (response_format, guided_json,
structured_outputs) keep vLLM's 400 (test_lenient_schemas)."""
import pytest

from gateway.errors import InvalidRequest
from gateway.llama_cpp_routes import completion_body
from gateway.openai import parse_chat
from gateway.openai_completion import parse_completion
from tests.unit.test_lenient_schemas import SKIPPED, _accepts, card  # noqa: F401 - card is the module's fixture

HI = [{"role": "user", "content": "Hi"}]


def _completion(body: dict, card):
    return parse_completion(completion_body(body, card), card, "x", read_thinking=False)


@pytest.mark.parametrize("schema, answer", [c[1:] for c in SKIPPED], ids=[c[0] for c in SKIPPED])
def test_completion_json_schema_leaves_the_keyword_unenforced(card, schema, answer):
    plan = _completion({"prompt": "Hi", "json_schema": schema}, card)
    assert _accepts(card, plan.gen.constraint.grammar, answer)
    assert not _accepts(card, plan.gen.constraint.grammar, '"text"')


@pytest.mark.parametrize("schema, answer", [c[1:] for c in SKIPPED[:3]], ids=[c[0] for c in SKIPPED[:3]])
def test_llama_cpps_json_schema_on_v1_chat_too(card, schema, answer):
    plan = parse_chat({"messages": HI, "json_schema": schema, "chat_template_kwargs": {"enable_thinking": False}},
                      card, "x")
    assert _accepts(card, plan.gen.constraint.grammar, answer)
    assert not _accepts(card, plan.gen.constraint.grammar, '"text"')


def test_vllms_guided_json_keeps_its_400(card):
    with pytest.raises(InvalidRequest, match='Unimplemented keys: \\["uniqueItems"\\]'):
        _completion({"prompt": "Hi", "guided_json": SKIPPED[0][1]}, card)


def test_a_pattern_no_grammar_reads_is_still_a_400(card):
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?=x)x+$"}}}
    with pytest.raises(InvalidRequest, match="(?s)json_schema cannot be enforced by constrained decoding: .*look-around"):
        _completion({"prompt": "Hi", "json_schema": schema}, card)


DRAFT3 = {"type": "object", "properties": {"a": {"type": "string", "required": True}}, "required": "a"}


@pytest.mark.parametrize("path", ["completion", "v1 chat"])
def test_a_required_that_is_no_list_is_ignored(card, path):
    """visit() reads `required` only as an array: llama-server serves draft-03's `"required": true` on a property (and
    a lone name) with the property optional, where 2020-12's meta-schema refused it; vLLM's guided_json keeps its
    400."""
    if path == "completion":
        plan = _completion({"prompt": "Hi", "json_schema": DRAFT3}, card)
    else:
        plan = parse_chat({"messages": HI, "json_schema": DRAFT3, "chat_template_kwargs": {"enable_thinking": False}},
                          card, "x")
    assert _accepts(card, plan.gen.constraint.grammar, "{}")
    assert _accepts(card, plan.gen.constraint.grammar, '{"a": "x"}')
    with pytest.raises(InvalidRequest, match='guided_json is not a valid JSON Schema: .* is not of type "array"'):
        _completion({"prompt": "Hi", "guided_json": DRAFT3}, card)
