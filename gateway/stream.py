"""Gateway process: incremental detokenizing, stop-string matching and SSE framing for streamed output."""
from __future__ import annotations

import bisect
import codecs
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from gateway import json_out

if TYPE_CHECKING:
    from gateway.errors import ApiError

REPLACEMENT_CHAR = "\ufffd"
SSE_DONE = b"data: [DONE]\n\n"
SSE_KEEPALIVE = b": keep-alive\n\n"


class IncrementalDetokenizer:
    """Turns token ids into text pieces whose concatenation equals decoding all ids at once (less a character the
    ids end inside, see flush).

    Like vLLM's detokenize_incrementally: decode a short window before and after the new ids and
    emit only the difference; while the window ends in U+FFFD because a multi-byte character's later
    bytes are in tokens not sampled yet, nothing is emitted, so no character is split across pieces.
    `decode` maps a list of ids to text (special tokens already skipped). `incomplete` (ids -> bool), when
    given, tells such a tail from a U+FFFD that no later byte can change (a stray continuation byte, a lead
    byte followed by a non-continuation): that one is emitted at once. Without it every trailing U+FFFD is
    held, and a run of tokens that each end in invalid bytes streamed nothing until one ended cleanly (and
    re-decoded a window that grew with it, as SGLang #34740).
    """

    def __init__(self, decode: Callable[[Sequence[int]], str],
                 incomplete: Optional[Callable[[Sequence[int]], bool]] = None):
        self._decode = decode
        self._incomplete = incomplete or (lambda token_ids: True)
        self.token_ids: list[int] = []
        self._prefix_offset = 0
        self._read_offset = 0

    def push(self, token_ids: Sequence[int]) -> str:
        """Adds sampled ids; returns the text that is now complete (maybe "")."""
        self.token_ids.extend(token_ids)
        prefix_text = self._decode(self.token_ids[self._prefix_offset:self._read_offset])
        new_text = self._decode(self.token_ids[self._prefix_offset:])
        if len(new_text) > len(prefix_text) and not (
                new_text.endswith(REPLACEMENT_CHAR) and self._incomplete(self.token_ids[self._prefix_offset:])):
            self._prefix_offset = self._read_offset
            self._read_offset = len(self.token_ids)
            return new_text[len(prefix_text):]
        if prefix_text and new_text == prefix_text:
            self._forget_unread()
        return ""

    def _forget_unread(self) -> None:
        """Drops the ids after the text read, which add nothing to it (special tokens skipped: no bytes): kept, the
        window grew with each of them and every push decoded all of them again, O(n^2) over a run of them (8k skipped
        tokens: 20 -> 153 us of gateway CPU a token, bench/long_output.py). Only after some text, whose ids stay as
        the context a decoder reads them in (a first token's leading space)."""
        del self.token_ids[self._read_offset:]

    def flush(self) -> str:
        """At the end of generation: returns whatever is still held, less a character the output ended inside (its
        first bytes sampled, the rest never, as when max_tokens cuts an emoji): that one is left out, not sent as
        U+FFFD, as vLLM's DecodeStream never emits it and Ollama's runner trims it (flushPending). Bytes that are
        invalid whatever follows keep their U+FFFD."""
        prefix_text = self._decode(self.token_ids[self._prefix_offset:self._read_offset])
        new_text = self._decode(self.token_ids[self._prefix_offset:])
        if new_text.endswith(REPLACEMENT_CHAR) and self._incomplete(self.token_ids[self._prefix_offset:]):
            new_text = new_text[:-1]
        self._prefix_offset = self._read_offset = len(self.token_ids)
        return new_text[len(prefix_text):] if len(new_text) > len(prefix_text) else ""


class ByteDetokenizer:
    """IncrementalDetokenizer's pieces for a byte-level vocabulary (GPT-2 / Qwen BPE), whose decode is the ids' bytes
    read as UTF-8 with a U+FFFD for each invalid part: the bytes go through one incremental UTF-8 decoder, so each
    piece is all the text that is final, less only the character the ids end inside, and a token costs the same
    however long the output. The window decoder held every piece while its text ended inside a character: a run of
    tokens that each end inside one (the tiny model's Japanese: ãģĵãĤ | ĵãģ | «ãģ | ¡ãģ = こ|ん|に|ち spread over
    byte pairs) streamed nothing until one ended cleanly, decoded a window that grew with the run (O(n^2): 1 ms a
    token at 4000 'aÃ'), and a stop string in it was seen only then, after the tokens past it. vLLM's DecodeStream,
    llama.cpp's server (validate_utf8) and Ollama's runner hold pending text so too; Ollama's runner finds such a stop
    at its token (runner/ollamarunner: FindStop reads the pending bytes before its IncompleteUnicode hold), as this
    does. The joined text is the same either way. `text_bytes` maps an id to the bytes it adds to the text."""

    def __init__(self, text_bytes: Callable[[int], bytes]):
        self._text_bytes = text_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_ids: Sequence[int]) -> str:
        """Adds sampled ids; returns the text that is now final (maybe "")."""
        return self._decoder.decode(b"".join(self._text_bytes(token_id) for token_id in token_ids))

    def flush(self) -> str:
        """At the end of generation: the character the output ended inside (the decoder holds only a valid start of
        one) is left out, as IncrementalDetokenizer.flush leaves it out."""
        self._decoder.reset()
        return ""


def detokenizer(card, skip_special_tokens: bool):
    """The detokenizer for one choice of a model (a gateway.model.ModelCard): bytes through a UTF-8 decoder for a
    byte-level vocabulary, the window decoder for any other."""
    if card.byte_level:
        return ByteDetokenizer(lambda token_id: card.text_bytes(token_id, skip_special_tokens))
    return IncrementalDetokenizer(lambda token_ids: card.decode(token_ids, skip_special_tokens),
                                  lambda token_ids: card.incomplete_text(token_ids, skip_special_tokens))


def utf8_incomplete_tail(data: bytes) -> bool:
    """True when data ends inside a UTF-8 character that more bytes could still complete (F0 9F, E6), false when it
    ends on a character boundary or in bytes that are invalid whatever follows (a stray 80, E6 41)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    decoder.decode(data[-4:], final=False)
    return bool(decoder.getstate()[0])


class TextOffsets:
    """Legacy completions `text_offset`: the character of the text where each token's bytes begin, streamed or not.

    The bytes go through one incremental UTF-8 decoder, so a character split over several tokens counts once, where
    it begins (adding up the lengths of each token's own text counted it once per piece, as U+FFFD, so the offsets
    ran past the text after the first emoji). `text_bytes` maps an id to the bytes it adds to the text.
    """

    def __init__(self, text_bytes: Callable[[int], bytes], start: int = 0):
        self._text_bytes = text_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._num_chars = start

    def push(self, token_ids: Sequence[int]) -> list[int]:
        """The offsets of token_ids, which follow every id pushed before. A token that begins inside a character
        (its first bytes continue the ones the decoder holds) begins where that character does; one that does not
        continue them begins after the U+FFFD those held bytes become."""
        offsets = []
        for token_id in token_ids:
            data = self._text_bytes(token_id)
            held = self._decoder.getstate()[0]
            start = self._num_chars
            if held and data and not _continues(held, data[:1]):
                start += len(held.decode("utf-8", errors="replace"))
            offsets.append(start)
            self._num_chars += len(self._decoder.decode(data))
        return offsets


def _continues(held: bytes, byte: bytes) -> bool:
    """True when byte is a valid next byte of the incomplete UTF-8 sequence held."""
    try:
        codecs.utf_8_decode(held + byte, "strict", False)
    except UnicodeDecodeError:
        return False
    return True


class StopMatcher:
    """Finds stop strings in streamed text; never emits a stop string or text that may begin one.

    Text that could be the start of a stop string is held back until the next piece proves it is
    not (or the stream ends). A stop string may span any number of pieces.
    """

    def __init__(self, stops: Sequence[str]):
        self.stops = [s for s in stops if s]
        self._max_len = max((len(s) for s in self.stops), default=0)
        # Each stop string once, with its first place in the list (of two that start at one position, the earlier
        # one in the list wins), and grouped by length: a match is one set lookup per position and length, a held
        # prefix one bisect per suffix, so a token's cost does not grow with the number of stop strings (scanning
        # all of them on every token took 0.45 ms a token at 1024 short ones; vLLM takes any number).
        self._rank: dict[str, int] = {}
        for rank, stop in enumerate(self.stops):
            self._rank.setdefault(stop, rank)
        self._lengths = sorted({len(stop) for stop in self._rank})
        self._sorted = sorted(self._rank)
        self._held = ""
        self.matched: Optional[str] = None

    def push(self, text: str, armed: bool = True) -> str:
        """Adds text; returns what is safe to emit. After a match, `matched` is set and the rest is dropped.

        Unarmed (before min_tokens, as vLLM does it), no match counts, but text that may begin a stop string is
        still held, so that a stop string that starts before min_tokens and ends after it is caught once armed.
        Only matches that end in the new text count (the held text alone never holds a whole stop string).
        """
        if self.matched is not None:
            return ""
        if not self.stops:
            return text
        buf = self._held + text
        cut = self._first_match(buf, len(self._held)) if armed else None
        if cut is not None:
            self._held = ""
            return buf[:cut]
        keep = self._partial_suffix_len(buf)
        self._held = buf[len(buf) - keep:] if keep else ""
        return buf[:len(buf) - keep]

    def flush(self) -> str:
        """At the end of generation: the held text was not a stop string after all."""
        held, self._held = self._held, ""
        return "" if self.matched is not None else held

    def _first_match(self, buf: str, num_held: int) -> Optional[int]:
        best: Optional[tuple[int, int]] = None   # (position, rank) of the match that starts first
        for size in self._lengths:
            # A match must end after the held text: it needs at least one character of the new text.
            last = len(buf) - size if best is None else min(len(buf) - size, best[0])
            for pos in range(max(0, num_held - size + 1), last + 1):
                rank = self._rank.get(buf[pos:pos + size])
                if rank is not None:
                    best = min(best, (pos, rank)) if best is not None else (pos, rank)
                    break
        if best is None:
            return None
        self.matched = self.stops[best[1]]
        return best[0]

    def _partial_suffix_len(self, buf: str) -> int:
        # Longest suffix of buf that some stop string starts with (the stop strings that start with a text are
        # together in sorted order, from the first one not below it).
        for size in range(min(len(buf), self._max_len - 1), 0, -1):
            tail = buf[-size:]
            at = bisect.bisect_left(self._sorted, tail)
            if at < len(self._sorted) and self._sorted[at].startswith(tail):
                return size
        return 0


def sse_event(payload: dict) -> bytes:
    """One SSE `data:` event carrying a JSON object."""
    return b"data: " + json_out.event_dumps(payload) + b"\n\n"


class SseFramer:
    """What the SSE framers (gateway/http_stream.Framer) share: the keep-alive comment, and a failure after the
    headers went out as vLLM's OpenAI server sends it; a route whose server writes its errors otherwise (SGLang,
    llama.cpp, LM Studio) overrides error()."""

    def error(self, error: ApiError, usage) -> list[bytes]:
        """A `data:` event with the error object ({"error": {"message", "type", "code", ...}}), then [DONE]."""
        return [sse_event(error.to_dict()), SSE_DONE]

    def keepalive(self) -> bytes:
        """An SSE comment line (`: keep-alive`): every SSE client skips it; proxies see bytes on the connection."""
        return SSE_KEEPALIVE
