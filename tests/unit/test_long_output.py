"""Unit tests: the gateway's work per streamed token does not grow with the output (bench/long_output.py measures
it): each piece is read against a bounded window of what came before, never the whole text again. No timings: the
memory one push allocates (tracemalloc) stands for the text it copies, and every output equals the old whole-text
path's on long random texts."""
import asyncio
import random
import tracemalloc
from dataclasses import replace

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.gen_request import ChoiceResult
from gateway.model import ModelCard
from gateway.pipeline import Delta
from gateway.reasoning import ReasoningSplitter
from gateway.responses_shape import OutputBuilder
from gateway.stream import IncrementalDetokenizer
from gateway.tool_stream import CallDelta

CALL_START = "<tool_call>\n<function=get_weather>\n<parameter=city>\n"
# Pieces a random output is made of: plain text, the tags the splitter reads, their halves.
PIECES = ["Hello", " world", "\n", "<tool_call>", "<tool_", "call>", "</think>", "</th", "ink>", "<think>",
          "<function=get_weather>", "<function={{name}}>", "{", '{"name"', " ", "</parameter>", "x" * 40]


def allocated(fn) -> int:
    """Bytes of the largest allocation peak while fn runs."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class _Rescanning(ReasoningSplitter):
    """The splitter as it was: every push reads the held call again (_call_read never set)."""

    @property
    def _call_read(self) -> bool:
        return False

    @_call_read.setter
    def _call_read(self, value: bool) -> None:
        pass


def random_output(rng: random.Random, num_pieces: int, weights: list) -> list:
    """num_pieces of PIECES (drawn with `weights`) joined, then cut at random places."""
    text = "".join(rng.choices(PIECES, weights, k=num_pieces))
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, num_pieces)))
    return [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]


@pytest.mark.parametrize("seed", range(40))
def test_reasoning_split_of_long_random_outputs_is_the_rescanning_ones(seed):
    rng = random.Random(seed)
    # Half the outputs with few </think>: long held calls.
    weights = [1 if piece not in ("</think>", "</th") or seed % 4 < 2 else 0.02 for piece in PIECES]
    pieces = random_output(rng, 400, weights)
    thinking_open = seed % 2 == 0
    new, old = ReasoningSplitter(thinking_open), _Rescanning(thinking_open)
    for piece in pieces:
        assert (new.push(piece), new.held) == (old.push(piece), old.held)
    assert new.flush() == old.flush()


def test_a_long_call_in_the_thinking_is_not_copied_again_a_token():
    # A call the thinking runs into is held to </think> or the end; each token copied and searched the whole held
    # call (O(n^2): 14 -> 60 us a token over a 32k-token call, bench/long_output.py).
    splitter = ReasoningSplitter(thinking_open=True)
    assert splitter.push("Let me look.\n" + CALL_START) == ("Let me look.\n", "")
    for _ in range(5000):
        splitter.push("Paris is a city. ")
    assert splitter.held > 80_000
    assert allocated(lambda: splitter.push("More. ")) < 4_000
    assert splitter.push("</param") == ("", "") and splitter.push("eter>\n</think>\n\nDone.") == (
        CALL_START + "Paris is a city. " * 5000 + "More. </parameter>\n", "Done.")


def test_a_non_streamed_answer_adds_each_piece_without_copying_the_text():
    # ChoiceResult.absorb did `self.content += piece`: on an attribute CPython copies the whole text every time.
    result = ChoiceResult(0)
    for _ in range(20_000):
        result.absorb(Delta(0, content="word "))
    assert allocated(lambda: result.absorb(Delta(0, content="last", reasoning="r"))) < 2_000
    assert result.content == "word " * 20_000 + "last" and result.reasoning == "r"
    assert replace(result, content="").content == "" and result == replace(result)


def test_a_responses_item_adds_each_piece_without_copying_the_text():
    output = OutputBuilder()
    for _ in range(20_000):
        output.answer("word ")
    assert allocated(lambda: output.answer("last")) < 4_000
    call = CallDelta(0, '{"a":"', id="call_1", name="f")
    output.calls([call] + [CallDelta(0, "word ") for _ in range(20_000)])
    assert allocated(lambda: output.calls([CallDelta(0, "more")])) < 4_000
    done = [event for event in output.calls([CallDelta(0, '"}', done=True)])
            if event["type"] == "response.function_call_arguments.done"]
    assert output.items[0]["content"][0]["text"] == "word " * 20_000 + "last"
    assert done[0]["arguments"] == output.items[1]["arguments"] == '{"a":"' + "word " * 20_000 + 'more"}'


class _Redecoding(IncrementalDetokenizer):
    """The detokenizer as it was: ids that add no text stay in its window."""

    def _forget_unread(self) -> None:
        pass


CARD = ModelCard.from_info(asyncio.run(FakeServing(build_tokenizer()).Info(None, None)))


def detokenizers(cls, counted: list):
    """A detokenizer as the pipeline makes one (ChoiceOutput, special tokens skipped); counted: the ids each decode
    call is given."""
    return cls(lambda ids: counted.append(len(ids)) or CARD.decode(ids, True),
               lambda ids: CARD.incomplete_text(ids, True))


def test_a_run_of_skipped_special_tokens_is_not_decoded_again_a_token():
    # Each skipped special token (it adds no text) stayed in the window that every push decodes: 8k of them after
    # some text cost 22 -> 157 us of gateway CPU a token (bench/long_output.py).
    counted = []
    detok = detokenizers(IncrementalDetokenizer, counted)
    assert detok.push(CARD.encode("Hello world")) == "Hello world"
    special = CARD.token_id("<|endoftext|>")
    for _ in range(3000):
        assert detok.push([special]) == ""
    counted.clear()
    assert detok.push(CARD.encode(" again")) == " again"
    assert max(counted) < 10


@pytest.mark.parametrize("seed", range(20))
def test_detokenized_pieces_of_long_random_outputs_are_the_redecoding_ones(seed):
    rng = random.Random(seed)
    specials = [CARD.token_id(t) for t in ("<|endoftext|>", "<|im_end|>")]
    pieces = ["Hello", " world", "😀", "é", "中文", "\n", " the quick brown fox"]
    ids = []
    for _ in range(300):
        ids += rng.choice([specials[:1] * rng.randint(1, 5), specials[1:], CARD.encode(rng.choice(pieces))])
    new, old = detokenizers(IncrementalDetokenizer, []), detokenizers(_Redecoding, [])
    at = 0
    while at < len(ids):
        size = rng.randint(1, 3)
        assert new.push(ids[at:at + size]) == old.push(ids[at:at + size])
        at += size
    assert new.flush() == old.flush()
