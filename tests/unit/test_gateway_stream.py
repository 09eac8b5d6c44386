"""Gateway text pipeline: incremental detokenizer (UTF-8 safe), stop strings, reasoning split, tool-call filter."""
import asyncio
import os
import random

import pytest
from tokenizers import Tokenizer

from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.gen_request import GenRequest
from gateway.model import ModelCard
from gateway.pipeline import ChoiceOutput
from gateway.reasoning import ReasoningSplitter
from gateway.stream import IncrementalDetokenizer, StopMatcher, TextOffsets
from gateway.tool_filter import ToolCallFilter
from gateway.tools import parse_tool_calls
from proto import pb

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_TOKENIZER = os.path.join(REPO, "models", "tiny", "tokenizer.json")
TEXTS = ["🎉 naïve café — 日本語のテキスト ✅ 👋🏽", "Emoji list: 🎉 🚀 ✅", "plain ascii only", "한국어 and 中文 mixed"]


def tokenizers():
    toks = [("fake-bpe", build_tokenizer())]
    if os.path.exists(TINY_TOKENIZER):
        toks.append(("tiny", Tokenizer.from_file(TINY_TOKENIZER)))
    return toks


@pytest.fixture(scope="module", params=tokenizers(), ids=lambda p: p[0])
def tokenizer(request):
    return request.param[1]


def _pieces(tokenizer, text, group):
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    detok = IncrementalDetokenizer(lambda xs: tokenizer.decode(list(xs)))
    pieces = [detok.push(ids[i:i + group]) for i in range(0, len(ids), group)]
    return ids, pieces + [detok.flush()]


@pytest.mark.parametrize("text", TEXTS, ids=["mixed", "emoji", "ascii", "cjk"])
@pytest.mark.parametrize("group", [1, 2, 3], ids=["1tok", "2tok", "3tok"])
def test_detokenizer_never_splits_a_character(tokenizer, text, group):
    ids, pieces = _pieces(tokenizer, text, group)
    assert "".join(pieces) == tokenizer.decode(ids) == text
    for piece in pieces:
        assert "\ufffd" not in piece
        piece.encode("utf-8", errors="strict")


def test_multibyte_chars_really_span_several_tokens(tokenizer):
    # Guards the test above: at least one character must need more than one token.
    ids = tokenizer.encode("日本語 🎉", add_special_tokens=False).ids
    assert any("\ufffd" in tokenizer.decode([i]) for i in ids)


def test_detokenizer_leaves_out_a_character_the_output_ends_inside(tokenizer):
    # As vLLM's DecodeStream and Ollama's flushPending: the text of a cut emoji is not sent as U+FFFD at the end.
    ids = tokenizer.encode("a🎉", add_special_tokens=False).ids
    if len(ids) < 3:
        pytest.skip("emoji is a single token here")
    detok = IncrementalDetokenizer(lambda xs: tokenizer.decode(list(xs)))
    assert detok.push(ids[:-1]) + detok.flush() == "a"


def _run_stop(stops, chunks):
    matcher = StopMatcher(stops)
    out = [matcher.push(c) for c in chunks]
    out.append(matcher.flush())
    return out, matcher.matched


@pytest.mark.parametrize("chunks", [["1, 2, 8", ", 9", ", 10, 11"], ["1, 2, 8, 9, 1", "0, 11"],
                                    list("1, 2, 8, 9, 10, 11")], ids=["mid", "split-in-number", "per-char"])
def test_stop_string_spanning_chunks_is_cut_and_never_leaks(chunks):
    out, matched = _run_stop([" 9, 10"], chunks)
    assert "".join(out) == "1, 2, 8,"
    assert matched == " 9, 10"
    running = ""
    for piece in out:
        running += piece
        assert "1, 2, 8,".startswith(running)


def test_partial_stop_prefix_is_released_when_it_does_not_complete():
    out, matched = _run_stop(["STOP"], ["go ST", "ILL here", " ST"])
    assert out == ["go ", "STILL here", " ", "ST"]
    assert matched is None


def test_earliest_of_several_stops_wins():
    out, matched = _run_stop(["world", "lo w"], ["hello", " world"])
    assert "".join(out) == "hel" and matched == "lo w"


def test_random_splits_match_whole_text_behaviour():
    rng = random.Random(0)
    text = "abc<end>def ghi <e xyz <en"
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(text)), 4))
        chunks = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
        out, matched = _run_stop(["<end>"], chunks)
        assert "".join(out) == "abc" and matched == "<end>"


def _stop_reference(stops, chunks):
    """What a stream with these stop strings emits, read from the whole text: the output ends at the first piece
    where a stop string is complete, before the one that starts first (the earlier in the list at one position)."""
    text, end = "", 0
    for chunk in chunks:
        text += chunk
        found = [(text.find(stop, max(0, end - len(stop) + 1)), rank, stop) for rank, stop in enumerate(stops)]
        found = [hit for hit in found if hit[0] >= 0]
        if found:
            pos, _, stop = min(found)
            return text[:pos], stop
        end = len(text)
    return text, None


def test_many_stop_strings_match_as_the_whole_text_reads():
    # 300 stop strings of many lengths sharing prefixes and first characters (SillyTavern's "\nName:" list); the
    # matcher looks them up by length and prefix, never one by one.
    rng = random.Random(1)
    names = ["".join(rng.choice("abAB:\n ") for _ in range(rng.randint(1, 7))) for _ in range(300)]
    for _ in range(300):
        text = "".join(rng.choice("abAB:\n xy") for _ in range(40))
        cuts = sorted(rng.sample(range(1, len(text)), 6))
        chunks = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
        stops = rng.sample(names, 40) + ["\n" + rng.choice(names) + ":"]
        out, matched = _run_stop(stops, chunks)
        expected, expected_stop = _stop_reference([s for s in stops if s], chunks)
        assert ("".join(out), matched) == (expected, expected_stop)
        running = ""
        for piece in out:
            running += piece
            assert expected.startswith(running)


def _split(thinking_open, chunks):
    splitter = ReasoningSplitter(thinking_open)
    reasoning, content = "", ""
    for chunk in chunks:
        r, c = splitter.push(chunk)
        reasoning, content = reasoning + r, content + c
    r, c = splitter.flush()
    return reasoning + r, content + c


@pytest.mark.parametrize("chunks", [["plan it</think>\n\nAnswer"], ["plan it</th", "ink>\n", "\nAnswer"],
                                    list("plan it</think>\n\nAnswer")], ids=["whole", "tag-split", "per-char"])
def test_reasoning_split_when_prompt_opened_think(chunks):
    assert _split(True, chunks) == ("plan it", "Answer")


def test_model_repeating_the_open_tag_is_dropped():
    assert _split(True, ["<thi", "nk>\nidea</think>\n\nok"]) == ("\nidea", "ok")


@pytest.mark.parametrize("chunks", [["check the tool<tool_call>\n<function=f>"],
                                    ["check the tool<tool", "_call>\n<fun", "ction=f>"]], ids=["whole", "tag-split"])
def test_tool_call_ends_reasoning_without_think_close(chunks):
    reasoning, content = _split(True, chunks)
    assert reasoning == "check the tool" and content.startswith("<tool_call>\n<fun")


def test_unclosed_reasoning_stays_reasoning():
    assert _split(True, ["still thinking <", "/thi"]) == ("still thinking </thi", "")


def test_thinking_off_keeps_plain_content_and_detects_model_think():
    assert _split(False, ["Hello ", "there"]) == ("", "Hello there")
    assert _split(False, ["<th", "ink>why</think>", "\n\nbecause"]) == ("why", "because")
    assert _split(False, ["<", "b>bold</b>"]) == ("", "<b>bold</b>")


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
CALL_TEXT = ("Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\n42 Paris\n</parameter>\n"
             "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")


@pytest.mark.parametrize("size", [1, 5, 1000], ids=["per-char", "5-chars", "whole"])
def test_tool_call_filter_streams_prose_and_parses_calls(size):
    flt = ToolCallFilter(TOOLS)
    streamed = "".join(flt.push(CALL_TEXT[i:i + size]) for i in range(0, len(CALL_TEXT), size))
    tail, calls = flt.finish()
    assert streamed + tail == "Let me check."
    assert len(calls) == 1 and calls[0]["type"] == "function" and calls[0]["id"].startswith("call_")
    assert calls[0]["function"] == {"name": "get_weather", "arguments": '{"city":"42 Paris","days":3}'}


def test_tool_call_filter_without_calls_returns_everything():
    flt = ToolCallFilter(TOOLS)
    text = "no tools here <tool_ but not a call  \n"
    streamed = "".join(flt.push(ch) for ch in text)
    tail, calls = flt.finish()
    assert streamed + tail == text and calls is None


@pytest.mark.parametrize("size", [1, 3, 100])
def test_text_with_a_tag_that_is_no_call_comes_back_whole(size):
    """The whitespace held back before "<tool_call>" must come back when the call does not parse (it was lost:
    'a < b and <tool_call> c' came back as 'a < b and<tool_call> c', streamed and not)."""
    text = "a < b and \n <tool_call> c"
    flt = ToolCallFilter(TOOLS)
    streamed = "".join(flt.push(text[i:i + size]) for i in range(0, len(text), size))
    tail, calls = flt.finish()
    assert calls is None and streamed + tail == text


def test_malformed_call_is_returned_as_text_and_hermes_json_is_accepted():
    flt = ToolCallFilter(TOOLS)
    flt.push("<tool_call>\n<function=get_weather>\nno end")
    tail, calls = flt.finish()
    assert calls is None and tail.startswith("<tool_call>")
    calls = parse_tool_calls('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>', TOOLS)
    assert calls[0]["function"] == {"name": "get_weather", "arguments": '{"city":"Oslo"}'}


def test_stop_reason_is_the_stop_string_or_the_stop_token_id():
    """vLLM's stop_reason: the matched stop string, the stop_token_ids id that ended the choice, None for eos."""
    tokenizer = build_tokenizer()
    info = asyncio.run(FakeServing(tokenizer).Info(None, None))
    card = ModelCard.from_info(info)
    ids = tokenizer.encode("Hello world").ids
    eos = card.eos_token_ids[0]

    def run(stop, stop_token_ids, last_id):
        out = ChoiceOutput(0, GenRequest("r", [1], 8, stop=stop, stop_token_ids=stop_token_ids), card)
        deltas = [out.push(pb.GenerateResponse(token_ids=[t]), None) for t in ids]
        deltas.append(out.push(pb.GenerateResponse(stop_token_id=last_id), "stop"))
        final = [d for d in deltas if d is not None and d.finish_reason][0]
        return final.finish_reason, final.stop_reason
    assert run([" world"], [], eos) == ("stop", " world")
    assert run([], [7], 7) == ("stop", 7)
    assert run([], [7], eos) == ("stop", None)


def _tiny_card() -> ModelCard:
    if not os.path.exists(TINY_TOKENIZER):
        pytest.skip("models/tiny not written (make model)")
    tok = Tokenizer.from_file(TINY_TOKENIZER)
    return ModelCard(model_id="m", max_context_len=64, tokenizer=tok, chat_template_source="", eos_token_ids=[],
                     generation_defaults={}, special_tokens={}, vocab_size=tok.get_vocab_size())


def _byte_token(card: ModelCard, byte: int) -> int:
    return next(i for i in range(card.tokenizer_vocab_size) if card.token_bytes(i) == bytes([byte]))


def test_invalid_bytes_stream_at_once_and_an_unfinished_character_waits():
    """A U+FFFD that no later byte can change (a stray continuation byte, as sampled tokens of a byte-level model
    often are) is sent with its token: each of 50 stray 0xA1 tokens streamed nothing until an ASCII token came (and
    the decoded window grew with them). A lead byte (0xE6) still waits for the bytes that finish its character."""
    card = _tiny_card()
    stray, lead = _byte_token(card, 0xA1), _byte_token(card, 0xE6)
    detok = IncrementalDetokenizer(card.decode, card.incomplete_text)
    assert [detok.push([stray]) for _ in range(5)] == ["\ufffd"] * 5
    assert detok.push([lead]) == ""
    rest = card.tokenizer.encode("本", add_special_tokens=False).ids
    finishing = [_byte_token(card, 0x97), _byte_token(card, 0xA5)]   # E6 97 A5 is 日
    assert detok.push(finishing[:1]) == "" and detok.push(finishing[1:]) == "日"
    assert detok.push(rest) + detok.flush() == "本"


@pytest.mark.parametrize("skip", [True, False], ids=["skip-special", "keep-special"])
def test_random_token_streams_decode_to_the_whole_text(skip):
    """Sampled ids in any grouping: the pieces add up to decode() of all of them, and no piece but a final flush
    ends inside a character that later bytes could finish."""
    card = _tiny_card()
    rng = random.Random(7)
    for _ in range(400):
        ids = [rng.randrange(card.tokenizer_vocab_size) for _ in range(rng.randrange(1, 30))]
        detok = IncrementalDetokenizer(lambda xs: card.decode(xs, skip), lambda xs: card.incomplete_text(xs, skip))
        step = rng.choice([1, 2, 3])
        text = ""
        for i in range(0, len(ids), step):
            piece = detok.push(ids[i:i + step])
            assert not (piece.endswith("\ufffd") and card.incomplete_text(ids[:i + step], skip))
            text += piece
        whole = card.decode(ids, skip)
        if whole.endswith("\ufffd") and card.incomplete_text(ids, skip):
            whole = whole[:-1]   # a character the output ends inside is left out
        assert text + detok.flush() == whole


def test_text_offset_of_a_token_after_an_unfinished_byte_that_it_does_not_finish():
    """Bytes DF then EF (two lead bytes) are two U+FFFD: the second token begins at 1, not where the first began."""
    card = _tiny_card()
    ids = [_byte_token(card, 0xDF), _byte_token(card, 0xEF), _byte_token(card, 0x41)]
    offsets = TextOffsets(card.token_bytes).push(ids)
    assert card.decode(ids) == "\ufffd\ufffdA" and offsets == [0, 1, 2]
    # A token that finishes the held character begins where that character does (E6 | 97 A5 is one character).
    ids = [_byte_token(card, 0x41), _byte_token(card, 0xE6), _byte_token(card, 0x97), _byte_token(card, 0xA5)]
    assert TextOffsets(card.token_bytes).push(ids) == [0, 1, 1, 1]
