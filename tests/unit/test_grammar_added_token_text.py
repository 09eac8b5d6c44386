"""Unit tests: a grammar whose forced text is an added token's text (`<think>`, `<tool_call>`, ...) is written and
accepted byte by byte (proto/grammar_tokenizer.py), by the worker and by the gateway's check. Before, llguidance forced
the added token itself and then refused it: POST /v1/chat/completions with structured_outputs {"regex": "<think>hi</think>"} (or a JSON schema's const
"<tool_call>", or Ollama's format with such an enum) was the 400 "constrained decoding failed: Parser Error: token
�[1022] doesn't satisfy the grammar; forced bytes: got '<'; applying 'ÿ'" (outlines#1771)."""
import json
import os

import pytest

from proto import pb
from worker.grammar import GrammarBook, start_grammar
from worker.model_card import load_model_card

TINY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models", "tiny")
ADDED_TEXT_CASES = [
    pytest.param("lark", 'start: /<think>hi<\\/think>/', "<think>hi</think>", id="regex-think-tags"),
    pytest.param("lark", 'start: "call: <tool_call>"', "call: <tool_call>", id="quoted-tool-call"),
    pytest.param("lark", 'start: /x<\\|im_end\\|>/', "x<|im_end|>", id="regex-special-token-text"),
    pytest.param("json_schema", json.dumps({"type": "object", "properties": {"tag": {"const": "<tool_response>"}},
                                            "required": ["tag"], "additionalProperties": False}),
                 {"tag": "<tool_response>"}, id="json-const"),
]


def added_token_ids() -> dict:
    """tokenizer.json's added tokens, text -> id."""
    text = load_model_card(TINY)["tokenizer_json"]
    spec = json.loads(text.decode() if isinstance(text, bytes) else text)
    return {token["content"]: token["id"] for token in spec["added_tokens"]}


@pytest.fixture(scope="module")
def book():
    if not os.path.isfile(os.path.join(TINY, "tokenizer.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    return GrammarBook.from_card(load_model_card(TINY))


def new_request(kind, grammar):
    return pb.NewRequest(req_id="r", sampling=pb.SamplingParams(), prompt_token_ids=[1, 2],
                         constraint=pb.Constraint(kind=kind, grammar=grammar))


def greedy_walk(book, grammar, max_steps=64) -> list:
    """Consumes, step by step, the allowed token of the most bytes that are not all blank (JSON allows blanks between
    its items; the forced text comes as one token where the mask forces it)."""
    token_ids = []
    for _ in range(max_steps):
        allowed = book.allowed([grammar])[0].nonzero()[:, 0].tolist()
        if grammar.is_done or grammar.error or not allowed:
            break
        token_id = max(allowed, key=lambda t: (bool(book.tokenizer.decode_bytes([t]).strip()),
                                               len(book.tokenizer.decode_bytes([t])), -t))
        if token_id in book.eos_token_ids:
            break
        grammar.consume(token_id)
        token_ids.append(token_id)
    return token_ids


@pytest.mark.parametrize("kind,grammar_text,expected", ADDED_TEXT_CASES)
def test_forced_added_token_text_is_written_and_accepted(book, kind, grammar_text, expected):
    grammar = start_grammar(book, new_request(kind, grammar_text))
    token_ids = greedy_walk(book, grammar)
    assert grammar.error == ""
    assert grammar.is_done
    text = book.tokenizer.decode_bytes(token_ids).decode()
    assert (json.loads(text) if kind == "json_schema" else text) == expected
    assert not set(token_ids) & set(added_token_ids().values())


def test_a_grammar_that_names_the_token_still_gets_it(book):
    grammar = start_grammar(book, new_request("lark", 'start: <think> "a" </think>'))
    token_ids = greedy_walk(book, grammar)
    assert grammar.error == "" and grammar.is_done
    ids = added_token_ids()
    assert token_ids[0] == ids["<think>"] and token_ids[-1] == ids["</think>"]


def test_plain_text_tokenizes_as_before(book):
    import llguidance
    card = load_model_card(TINY)
    text = card["tokenizer_json"]
    text = text.decode() if isinstance(text, bytes) else text
    base = llguidance.LLTokenizer(text, n_vocab=book.vocab_size, eos_token=book.eos_token_ids)
    assert book.tokenizer.tokenize_str("hello, world: 1 2 3") == base.tokenize_str("hello, world: 1 2 3")
    assert all(book.tokenizer.decode_bytes([t]) == base.decode_bytes([t]) for t in range(book.vocab_size))
    assert [t for t in range(book.vocab_size) if book.tokenizer.is_special_token(t)] == \
        [t for t in range(book.vocab_size) if base.is_special_token(t)]


TAG_SCHEMA = {"type": "object", "properties": {"tag": {"const": "<tool_response>"}}, "required": ["tag"],
              "additionalProperties": False}
# (route body's structured-output fields, the answer the grammar writes)
GATEWAY_CASES = {
    "json-const": ({"response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": TAG_SCHEMA}}},
                   '{"tag": "<tool_response>"}'),
    "regex": ({"structured_outputs": {"regex": "a <tool_response> b"}}, "a <tool_response> b"),
    "choice": ({"structured_outputs": {"choice": ["<tool_response>"]}}, "<tool_response>"),
}


@pytest.mark.parametrize("case", GATEWAY_CASES)
async def test_the_gateway_check_reads_forced_added_token_text_as_the_worker_does(stack, case):
    """The gateway's check before a request starts follows the text a grammar forces (gateway/grammar_check.py); with
    llguidance's own tokenizer it forced the added token there, failed, and answered these the 400 "the grammar allows
    no output (Parser Error: token ... doesn't satisfy the grammar; forced bytes: got '<' ...)", which the worker
    (proto/grammar_tokenizer.py) serves."""
    client, fake = stack
    fields, answer = GATEWAY_CASES[case]
    fake.script.reply = answer
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False, **fields}
    response = await client.post("/v1/chat/completions", json=body)
    payload = await response.json()
    assert "error" not in payload, payload
    assert payload["choices"][0]["message"]["content"] == answer


def test_the_gateway_card_forces_the_bytes_tokens():
    """What the gateway's grammar tokenizer forces for a const of an added token's text: that text, by plain tokens."""
    import llguidance
    from gateway.structured import json_grammar
    from tests.unit.grammar_card import tiny_card
    card = tiny_card()
    grammar = llguidance.LLMatcher.grammar_from_lark(json_grammar(TAG_SCHEMA, False, card))
    matcher = llguidance.LLMatcher(card.grammar_tokenizer(), grammar, log_level=0)
    forced = matcher.compute_ff_tokens()
    assert matcher.consume_tokens(forced) and not matcher.is_error()
    assert card.decode(forced, False) == '{"tag": "<tool_response>"}'
    assert not set(forced) & set(added_token_ids().values())
