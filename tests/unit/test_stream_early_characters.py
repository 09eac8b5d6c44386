"""Unit tests: a byte-level model's streamed text holds back only the character its ids end inside. Tokens that each
end inside a character (Japanese on the tiny tokenizer: 'ãģĵãĤ' | 'ĵãģ' | '«ãģ' | '¡ãģ' is こ|ん|に|ち spread over
byte pairs) streamed nothing until one ended cleanly, and a stop string in such a run matched only then, after every
token of the run was generated; Ollama's runner finds such a stop at its token (FindStop reads the pending bytes
before the IncompleteUnicode hold). The oracle after every token is transformers' decode of the ids so far, less the
character they end inside (test_stream_detok_oracle.reference)."""
import json
import random

import pytest

from gateway.stream import IncrementalDetokenizer, detokenizer
from tests.unit.test_gateway_stream import _tiny_card
from tests.unit.test_stream_detok_oracle import TEXTS, random_ids, reference
from tests.unit.test_template_hf_sandbox import tiny_stack  # noqa: F401 - tiny_stack is a fixture

GREETING = "こんにちは、ありがとうございます。日本語"


def _pieces(ids: list, step: int, skip: bool = True) -> list:
    detok = detokenizer(_tiny_card(), skip)
    return [detok.push(ids[at:at + step]) for at in range(0, len(ids), step)] + [detok.flush()]


def test_each_character_streams_with_the_token_that_finishes_it():
    ids = _tiny_card().encode(GREETING)
    pieces = _pieces(ids, 1)
    # Before: ['', '', '', '', 'こんにちは', ...]: the first four tokens each end inside a character.
    assert pieces[:5] == ["こ", "ん", "に", "ち", "は"]
    for num in range(1, len(ids) + 1):
        assert "".join(pieces[:num]) == reference(ids[:num])
    assert "".join(pieces) == GREETING


@pytest.mark.parametrize("skip", [True, False], ids=["skip-special", "keep-special"])
def test_streamed_text_so_far_is_the_decode_of_the_ids_so_far(skip):
    rng = random.Random(3)
    card = _tiny_card()
    # Odd seeds end in a special token; a random id may be a lone byte, a merged piece or a markup token.
    draws = [random_ids(seed) for seed in range(30)] + [card.encode(text) for text in TEXTS]
    draws += [[rng.randrange(card.tokenizer_vocab_size) for _ in range(40)] for _ in range(30)]
    for ids in draws:
        step = rng.choice([1, 2, 3])
        pieces = _pieces(ids, step, skip)
        for num in range(1, len(pieces)):
            assert "".join(pieces[:num]) == reference(ids[:num * step], skip)
        assert "".join(pieces) == reference(ids, skip)


def test_a_long_run_streams_each_piece_at_its_token():
    # 4000 'aÃ' ("a", then a lead byte the next 'a' makes a U+FFFD): the window decoder streamed nothing and decoded
    # the whole run again every token (1 ms a token at the end of it).
    pieces = _pieces([_tiny_card().token_id("aÃ")] * 4000, 1)
    assert pieces[:3] == ["a", "\ufffda", "\ufffda"] and set(pieces[1:-1]) == {"\ufffda"} and pieces[-1] == ""


def test_a_byte_fallback_tokenizer_still_holds_its_unknown_tail():
    # Without exact byte knowledge (a SentencePiece byte-fallback vocabulary writes one U+FFFD per byte) nothing is
    # sent early: 'ab' then an unfinished character waits whole, as before.
    decode = {(1,): "ab\ufffd", (1, 2): "ab\ufffd\ufffd", (1, 2, 3): "abé"}
    detok = IncrementalDetokenizer(lambda ids: decode.get(tuple(ids), ""), lambda ids: True)
    assert [detok.push([1]), detok.push([2]), detok.push([3])] == ["", "", "abé"]


async def test_a_stop_string_inside_such_a_run_ends_the_answer_at_its_token(tiny_stack):
    client, fake = tiny_stack
    # 'aÃ' is 'a' then a lead byte; each next 'aÃ' makes that byte a U+FFFD and opens another.
    fake.script.token_ids = [fake.tokenizer.token_to_id("aÃ")] * 40
    body = {"model": "fake-model", "prompt": "hi", "max_tokens": 40, "stop": ["a\ufffda"],
            "return_token_ids": True}
    answer = await (await client.post("/v1/completions", json=body)).json()
    choice = answer["choices"][0]
    # Before: the stop matched at the flush after all 40 tokens (completion_tokens 40).
    assert (choice["text"], choice["finish_reason"], choice["stop_reason"]) == ("", "stop", "a\ufffda")
    assert answer["usage"]["completion_tokens"] == len(choice["token_ids"]) == 2
    response = await client.post("/v1/completions", json={**body, "stream": True})
    chunks = [json.loads(line[6:]) for line in (await response.text()).splitlines()
              if line.startswith("data: {")]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == ["stop"]
    assert sum(len(c["choices"][0]["token_ids"]) for c in chunks) == 2
