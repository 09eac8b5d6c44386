"""Unit tests: streamed text against transformers' decode of the whole output. For random id sequences from the tiny
model's vocabulary (byte tokens that split a character over several ids, special tokens), on every route, the
concatenated deltas equal the answer that was not streamed and tokenizer.decode(all_ids) (with the same special-token
rule), less a character the output ended inside (vLLM's DecodeStream never emits it); no U+FFFD appears that the whole
decode has none of; and a stop string that straddles token boundaries cuts streamed and whole text at its first
occurrence, as vLLM's StopChecker cuts the detokenized text (fake scheduler scripting the ids)."""
import codecs
import functools
import random

import pytest

from tests.unit.test_chat_template_oracle import hf_tokenizer
from tests.unit.test_template_hf_sandbox import tiny_stack  # noqa: F401 - tiny_stack is a fixture
from tests.unit.test_unfinished_character import _bodies, _text

ROUTES = list(_bodies(1))
SEEDS = range(6)


@functools.lru_cache(maxsize=1)
def vocabulary() -> tuple:
    """(ids to draw from: the byte and merged tokens, and the special tokens; the special ids). The markup tokens
    (<think>, <tool_call>, ...) are left out: the chat routes' parsers read them, which is not detokenizing."""
    tok = hf_tokenizer()
    special = set(tok.all_special_ids)
    markup = {i for i, token in tok.added_tokens_decoder.items() if not token.special}
    ids = [i for i in range(len(tok)) if i not in markup and i != tok.eos_token_id]
    return tuple(ids), frozenset(special - {tok.eos_token_id})


def random_ids(seed: int, length: int = 40) -> list:
    """Ids where byte tokens that split a character are frequent: half drawn from the single-byte tokens."""
    rng = random.Random(seed)
    ids, special = vocabulary()
    tok = hf_tokenizer()
    single = [i for i in ids if len(tok.convert_ids_to_tokens(i)) == 1 and i < 256]
    pool = [rng.choice(single) if rng.random() < 0.5 else rng.choice(ids) for _ in range(length)]
    return pool + ([rng.choice(sorted(special))] if seed % 2 else [])


TEXTS = ["日本語のテキスト、中文字符", "👨‍👩‍👧‍👦 and 🏳️‍🌈 👍🏽!", "e\u0301 Z̤͔ͧ̑̓ä͖̭̈̇ ñ", "a\r\nb\tc  d",
         "😀😁😂 🤖 𝔘𝔫𝔦", "ab\u200dcd\ufeff \U0010fffd"]


def split_ids(seed: int) -> list:
    """A valid text's ids, some of its tokens spelled out as their single-byte tokens (a character's bytes spread
    over several ids, as a model may sample them): the whole decode holds no U+FFFD."""
    rng = random.Random(seed)
    tok = hf_tokenizer()
    out = []
    for token_id in tok.encode(TEXTS[seed % len(TEXTS)], add_special_tokens=False):
        piece = tok.convert_ids_to_tokens(token_id)
        split = len(piece) > 1 and rng.random() < 0.7
        out += tok.convert_tokens_to_ids(list(piece)) if split else [token_id]
    return out


def reference(ids: list, skip_special_tokens: bool = True) -> str:
    """transformers' decode of all ids, less the character its bytes end inside (the bytes computed apart: more
    bytes could still complete it, so no streaming server emits it)."""
    tok = hf_tokenizer()
    text = tok.decode(ids, skip_special_tokens=skip_special_tokens)
    byte_decoder = {char: byte for byte, char in bytes_to_unicode().items()}
    kept = [i for i in ids if not (skip_special_tokens and i in tok.all_special_ids)]
    tail = b"".join(bytes(byte_decoder[c] for c in tok.convert_ids_to_tokens(i)) if i not in tok.all_special_ids
                    else b"" for i in kept[-4:])
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    decoder.decode(tail, final=False)
    return text[:-1] if decoder.getstate()[0] and text.endswith("\ufffd") else text


def bytes_to_unicode() -> dict:
    """GPT-2's byte-level alphabet (byte -> the character a token spells it with), which Qwen's tokenizer uses."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("route", ROUTES)
async def test_streamed_text_is_the_whole_decode(tiny_stack, route, seed):
    client, fake = tiny_stack
    ids = random_ids(seed)
    fake.script.token_ids = ids
    body = _bodies(len(ids) + 1)[route]
    whole = await _text(client, route, body, stream=False)
    streamed = await _text(client, route, body, stream=True)
    expected = reference(ids)
    assert streamed == whole == expected
    assert ("\ufffd" in streamed) == ("\ufffd" in expected)


@pytest.mark.parametrize("cut", [0, 1, 2], ids=["whole", "less-1", "less-2"])
@pytest.mark.parametrize("seed", range(len(TEXTS)))
@pytest.mark.parametrize("route", ROUTES)
async def test_split_characters_stream_whole(tiny_stack, route, seed, cut):
    client, fake = tiny_stack
    ids = split_ids(seed)
    ids = ids[:len(ids) - cut]
    fake.script.token_ids = ids
    body = _bodies(len(ids) + 1)[route]
    streamed = await _text(client, route, body, stream=True)
    assert streamed == await _text(client, route, body, stream=False) == reference(ids)
    assert "\ufffd" not in streamed


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/completions"])
async def test_special_tokens_kept_when_asked(tiny_stack, route, seed):
    client, fake = tiny_stack
    ids = random_ids(2 * seed + 1)   # odd seeds end in a special token
    fake.script.token_ids = ids
    body = {**_bodies(len(ids) + 1)[route], "skip_special_tokens": False}
    whole = await _text(client, route, body, stream=False)
    streamed = await _text(client, route, body, stream=True)
    assert streamed == whole == reference(ids, skip_special_tokens=False)


def straddling_stop(ids: list, seed: int) -> str:
    """A stop string made of the end of one token's text and the start of the next ones' (a character split over
    byte tokens may be on either side), its first occurrence anywhere in the text."""
    rng = random.Random(seed)
    text = reference(ids)
    for _ in range(100):
        cut = rng.randrange(2, len(ids) - 2)
        boundary = len(hf_tokenizer().decode(ids[:cut]))
        stop = text[max(0, boundary - rng.randint(1, 2)):boundary + rng.randint(1, 3)]
        if text.startswith(hf_tokenizer().decode(ids[:cut])) and len(stop) > 1 and "\ufffd" not in stop:
            return stop
    raise AssertionError("no clean token boundary in this draw")


def stop_field(route: str, stop: str) -> dict:
    if route in ("/api/chat", "/api/generate"):
        return {"options": {**_bodies(64)[route].get("options", {}), "stop": [stop]}}
    return {"stop_sequences": [stop]} if route == "/v1/messages" else {"stop": [stop]}


@pytest.mark.parametrize("draw", ["random-0", "random-1", "random-2", *(f"split-{i}" for i in range(len(TEXTS)))])
@pytest.mark.parametrize("route", ROUTES)
async def test_stop_string_across_tokens(tiny_stack, route, draw):
    client, fake = tiny_stack
    family, seed = draw.split("-")
    ids = random_ids(int(seed)) if family == "random" else split_ids(int(seed))
    stop = straddling_stop(ids, int(seed))
    fake.script.token_ids = ids
    body = {**_bodies(len(ids) + 1)[route], **stop_field(route, stop)}
    whole = await _text(client, route, body, stream=False)
    streamed = await _text(client, route, body, stream=True)
    text = reference(ids)
    assert streamed == whole == text[:text.index(stop)]
    if route in ("/v1/chat/completions", "/v1/completions"):
        body["include_stop_str_in_output"] = True
        assert await _text(client, route, body, stream=True) == text[:text.index(stop) + len(stop)]
