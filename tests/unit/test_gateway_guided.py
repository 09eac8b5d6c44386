"""vLLM's guided decoding fields on /v1 (fake scheduler): guided_choice / regex / grammar (Lark and GBNF) / json become
the worker's Constraint and the worker's grammar follows them, thinking first where the prompt opens it, and their
errors are 400s naming the field; a structured output of the wrong type is a 400."""
import os

import pytest
from tokenizers import Tokenizer

from tests.unit.test_gateway_fields import BASE, TOOLS, post
from worker.grammar import GrammarBook


GUIDED = [({"guided_choice": ["yes", "no"]}, 'start: GUIDED_CHOICE\nGUIDED_CHOICE: "yes" | "no"\n'),
          ({"structured_outputs": {"choice": ["a/b", 'q"']}}, 'start: GUIDED_CHOICE\nGUIDED_CHOICE: "a/b" | "q\\""\n'),
          ({"guided_regex": "[a-z]+/[0-9]"}, "start: /[a-z]+\\/[0-9]/\n"),
          ({"structured_outputs": {"regex": "\\d{3}"}}, "start: /[0-9]{3}/\n"),
          ({"guided_regex": "[a-z]+\\\\/x"}, "start: /[a-z]+\\\\\\/x/\n"),
          ({"structured_outputs": {"regex": "a\nb"}}, "start: /a\\nb/\n"),
          ({"guided_grammar": 'start: "x" NUM\nNUM: /[0-9]+/\n'}, 'start: "x" NUM\nNUM: /[0-9]+/\n'),
          ({"structured_outputs": {"grammar": 'start: "x"'}}, 'start: "x"')]


@pytest.mark.parametrize("field,grammar", GUIDED, ids=[next(iter(g[0])) + str(i) for i, g in enumerate(GUIDED)])
async def test_guided_fields_become_the_lark_constraint(stack, field, grammar):
    client, fake = stack
    status, body = await post(client, {**BASE, **field})
    assert status == 200, body
    constraint = fake.script.requests[0].constraint
    assert constraint.kind == "lark" and constraint.grammar == grammar


@pytest.mark.parametrize("field", [{"guided_json": {"type": "object", "properties": {"a": {"type": "integer"}}}},
                                   {"guided_json": '{"type": "object"}'},
                                   {"structured_outputs": {"json": {"type": "array"}}},
                                   {"structured_outputs": {"json_object": True}}])
async def test_guided_json_becomes_a_json_schema_grammar(stack, field):
    client, fake = stack
    status, body = await post(client, {**BASE, **field})
    assert status == 200, body
    assert fake.script.requests[0].constraint.grammar.startswith("start: %json{")


async def test_guided_choice_on_completions(stack):
    client, fake = stack
    status, body = await post(client, {"model": "default", "prompt": "hi", "guided_choice": ["y"]},
                              "/v1/completions")
    assert status == 200 and fake.script.requests[0].constraint.grammar == 'start: GUIDED_CHOICE\nGUIDED_CHOICE: "y"\n'


async def test_guided_with_thinking_lets_the_model_reason_first(stack):
    client, fake = stack
    status, _ = await post(client, {**BASE, "enable_thinking": True, "guided_choice": ["yes"]})
    assert status == 200
    grammar = fake.script.requests[0].constraint.grammar
    assert grammar.startswith("start: /(?s:.*)/ ") and grammar.endswith(' "yes"\n') and "</think>" in grammar


async def test_thousands_of_guided_choices_are_one_lexeme_the_worker_follows(stack):
    """llguidance keeps a parser row item per alternative of a rule: as a rule of 3000 strings the worker's first
    step failed ("Current row has 3003 items; max is 2000"), a 400 naming no field, where vLLM (xgrammar, guidance)
    takes such lists. As one terminal the lexer matches them, and the worker's grammar follows a choice to its end."""
    client, fake = stack
    status, body = await post(client, {**BASE, "guided_choice": [f"label{i}" for i in range(3000)]})
    assert status == 200, body
    tiny = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny", "tokenizer.json")
    with open(tiny) as f:
        book = GrammarBook(f.read(), 1024, [1017])
    ids = Tokenizer.from_file(tiny).encode("label2500", add_special_tokens=False).ids
    grammar = book.start(fake.script.requests[0].constraint, ids)
    assert grammar.error == "" and grammar.matcher.is_accepting()


@pytest.mark.parametrize("pattern,text", [("[a-z]+\\\\/x", "ab\\/x"), ("line one\nline two", "line one\nline two"),
                                          ("[^/]+/[0-9]", "a b/7"), ("\\d{3}-\\w+", "123-ab_9")],
                         ids=["slash-after-escaped-backslash", "literal-newline", "class-with-slash", "ascii-classes"])
async def test_guided_regex_is_followed_as_the_pattern_reads(stack, pattern, text):
    """A slash after an escaped backslash closed the Lark lexeme early (a 400 'lexer error' for a valid pattern), and a
    literal newline was a 400 'must be on one line'; vLLM hands either pattern to its grammar backend as it is. The
    worker's grammar now accepts exactly the text the pattern matches."""
    client, fake = stack
    status, body = await post(client, {**BASE, "guided_regex": pattern})
    assert status == 200, body
    tiny = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny", "tokenizer.json")
    with open(tiny) as f:
        book = GrammarBook(f.read(), 1024, [1017])
    ids = Tokenizer.from_file(tiny).encode(text, add_special_tokens=False).ids
    grammar = book.start(fake.script.requests[0].constraint, ids)
    assert grammar.error == "" and grammar.matcher.is_accepting()


# vLLM's structured-outputs docs write guided_grammar in GBNF (xgrammar's syntax); its guidance backend converts it.
SQL_GBNF = """root ::= select_statement
select_statement ::= "SELECT " column " from " table " where " condition
column ::= "col_1 " | "col_2 "
table ::= "table_1 " | "table_2 "
condition ::= column "= " number
number ::= "1 " | "2 "
"""


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
async def test_a_gbnf_guided_grammar_is_followed(stack, thinking):
    """A GBNF grammar (root ::= ...) was a 400 'EBNF/GBNF grammars are not supported'; the worker's grammar now takes
    exactly the sentences it derives (after the reasoning, with thinking on)."""
    client, fake = stack
    status, body = await post(client, {**BASE, "enable_thinking": thinking, "guided_grammar": SQL_GBNF})
    assert status == 200, body
    tiny = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny", "tokenizer.json")
    with open(tiny) as f:
        book = GrammarBook(f.read(), 1024, [1017])
    tokenizer = Tokenizer.from_file(tiny)
    prefix = "a thought</think>\n\n" if thinking else ""
    for text, ok in (("SELECT col_1  from table_2  where col_2 = 1 ", True), ("SELECT col_3  from table_2 ", False)):
        grammar = book.start(fake.script.requests[-1].constraint, [])
        ids = tokenizer.encode(prefix + text, add_special_tokens=False).ids
        assert all(grammar.matcher.consume_token(i) for i in ids) and grammar.matcher.is_accepting() if ok else \
            not (all(grammar.matcher.consume_token(i) for i in ids) and grammar.matcher.is_accepting())


@pytest.mark.parametrize("text", ["١٢٣", "12３", "123-é"], ids=["arabic-indic", "fullwidth", "latin-letter"])
async def test_guided_regex_classes_are_ascii(stack, text):
    """\\d and \\w are ASCII, as vLLM's default xgrammar backend reads them: Rust's regex (llguidance's) reads them
    as Unicode, and guided_regex \\d{6} wrote '᱄3٧٨٧߆' on the tiny model."""
    client, fake = stack
    status, body = await post(client, {**BASE, "guided_regex": "\\d{3}(-\\w+)?"})
    assert status == 200, body
    tiny = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny", "tokenizer.json")
    with open(tiny) as f:
        book = GrammarBook(f.read(), 1024, [1017])
    grammar = book.start(fake.script.requests[0].constraint, [])
    ids = Tokenizer.from_file(tiny).encode(text, add_special_tokens=False).ids
    assert not (all(grammar.matcher.consume_token(i) for i in ids) and grammar.matcher.is_accepting())


GUIDED_ERRORS = [
    ({"guided_grammar": "root ::= \"a\" (b"}, "guided_grammar", "invalid_value", "not a valid GBNF grammar"),
    ({"guided_grammar": "x: \"a\""}, "guided_grammar", "invalid_value", "needs a 'start' rule"),
    ({"guided_choice": [""]}, "guided_choice", "invalid_value", "non-empty list"),
    ({"guided_regex": "(?=a)b"}, "guided_regex", "unsupported_schema", "cannot be enforced"),
    ({"guided_regex": "ab\\"}, "guided_regex", "invalid_value", "incomplete escape sequence"),
    ({"guided_json": "{bad"}, "guided_json", "invalid_value", "not valid JSON"),
    ({"guided_choice": ["a"], "guided_regex": "b"}, "guided_regex", "invalid_value", "use one guided-decoding"),
    ({"guided_choice": ["a"], "response_format": {"type": "json_object"}}, "guided_choice", "unsupported",
     "cannot be combined with response_format"),
    ({"guided_choice": ["a"], "tools": TOOLS, "tool_choice": "required"}, "guided_choice", "unsupported",
     "cannot be combined with tool_choice"),
    ({"structured_outputs": {"json": {}}, "tools": TOOLS, "tool_choice": {"type": "function", "function": {
        "name": TOOLS[0]["function"]["name"]}}}, "structured_outputs", "unsupported",
     "cannot be combined with tool_choice"),
    ({"structured_outputs": "json"}, "structured_outputs", "invalid_type", "structured_outputs"),
    ({"structured_outputs": {"structural_tag": "{}"}}, "structured_outputs.structural_tag.structures", "invalid_value",
     "needs non-empty structures and triggers"),
    ({"structured_outputs": {"regex": "a", "structural_tag": {"triggers": ["<f"], "structures": [
        {"begin": "<f>", "end": "</f>"}]}}}, "structured_outputs.structural_tag", "invalid_value",
     "use one guided-decoding field"),
]


@pytest.mark.parametrize("field,param,code,message", GUIDED_ERRORS, ids=[e[3][:20] for e in GUIDED_ERRORS])
async def test_guided_errors_are_400_naming_the_field(stack, field, param, code, message):
    client, fake = stack
    status, body = await post(client, {**BASE, **field})
    assert status == 400 and body["error"]["param"] == param and body["error"]["code"] == code
    assert message in body["error"]["message"] and not fake.script.requests


@pytest.mark.parametrize("outputs, param, words", [
    ({"json": 0}, "structured_outputs.json", '0 is not of type "object", "string", "null"'),
    ({"choice": 0}, "structured_outputs.choice", '0 is not of type "array", "null"'),
    ({"regex": False}, "structured_outputs.regex", 'false is not of type "string", "null"'),
    ({"grammar": []}, "structured_outputs.grammar", '[] is not of type "string", "null"'),
    ({"json_object": 2}, "structured_outputs.json_object", '2 is not of type "boolean", "null"'),
    ({"choice": ["a", 1]}, "structured_outputs.choice[1]", '1 is not of type "string"'),
], ids=["json zero", "choice zero", "regex false", "grammar list", "json_object two", "choice item"])
async def test_a_structured_output_of_the_wrong_type_is_a_400(stack, outputs, param, words):
    """A falsy value of the wrong type was read as absent (`{"json": 0}` generated unconstrained text, a 200); vLLM's
    StructuredOutputsParams (sampling_params.py: json str | dict, regex / grammar str, choice list[str], json_object
    bool) refuses it with a 400."""
    client, fake = stack
    for path, base in (("/v1/chat/completions", BASE), ("/v1/completions", {"model": "default", "prompt": "hi"})):
        status, body = await post(client, {**base, "structured_outputs": outputs}, path)
        assert status == 400 and body == {"error": {"message": f"invalid value for '{param}': {words}",
                                                    "type": "invalid_request_error", "param": param,
                                                    "code": "invalid_type"}}
    assert not fake.script.requests


@pytest.mark.parametrize("choice", [{}, {"tool_choice": "auto"}, {"tool_choice": "none"}], ids=["absent", "auto", "none"])
@pytest.mark.parametrize("field", [{"structured_outputs": {"json": {"type": "object"}}}, {"guided_choice": ["a", "b"]}],
                         ids=["structured_outputs", "guided_choice"])
async def test_guided_decoding_beside_tools_the_model_may_skip_constrains_the_answer(stack, field, choice):
    """vLLM's check_structured_outputs_count refuses structured outputs only beside a named tool_choice ('You can
    only either use constraints for structured outputs or tools, not both.'; auto, required and none pass): with
    tools the model may leave, the constraint is the answer's grammar, the tools stay in the prompt. It was the 400
    'structured_outputs cannot be combined with tools' for tool_choice auto or absent."""
    client, fake = stack
    status, body = await post(client, {**BASE, **field})
    assert status == 200, body
    alone = fake.script.requests[-1].constraint
    status, body = await post(client, {**BASE, **field, "tools": TOOLS, **choice})
    assert status == 200, body
    assert fake.script.requests[-1].constraint == alone and alone.grammar
