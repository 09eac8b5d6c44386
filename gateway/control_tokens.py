"""Gateway process: control-token text inside a request's strings (messages, tools, documents, template variables)
tokenized as the characters it is, as transformers' apply_chat_template(sanitize_control_tokens=True) does it
(utils/chat_template_utils.py: mark_control_tokens, encode_marked_chat), for the special tokens.

Each control token in a client's string is wrapped in two private-use markers before the template renders it; the
template's own control tokens carry none. encode() then reads a marked token as plain text and drops the markers; a
marker the template separated from its token (a `split()`) is dropped too but still breaks the text, so the text on
either side cannot join into a control token.

A string that ends with the start of a control token's text (or begins with the rest of one) also carries a break
mark there: a template that writes two strings side by side (text parts, two messages) must not make
["x<|im_", "end|>"] a control token, which marking each string alone lets through (transformers' sanitizing does).
The rendered text is sealed before it is encoded: a control token a break lies inside is marked as text, as if the
client had sent it whole, and the breaks are dropped, so joins that make no control token encode as without them."""
from __future__ import annotations

import bisect
import functools
import itertools
import re
from typing import Iterable, Optional

from tokenizers import Tokenizer

# transformers' markers (chat_template_utils._CONTROL_TOKEN_START / _END); a client's own copies are dropped.
MARK_START = "\U000f0000"
MARK_END = "\U000f0001"
# Where a client's string ends inside a control token's text (or begins inside one): the next private-use code point.
BREAK = "\U000f0002"
_MARKS = re.compile(f"[{MARK_START}{MARK_END}{BREAK}]")


def unmark(text: str) -> str:
    """`text` without markers: the prompt as the template wrote it (return_prompt_text, /apply-template)."""
    return _MARKS.sub("", text) if MARK_START in text or MARK_END in text or BREAK in text else text


@functools.lru_cache(maxsize=64)
def _pattern(tokens: tuple) -> re.Pattern:
    # Longer tokens first, so that a token wins over the tokens it contains; "(?!)" never matches.
    return re.compile("|".join(map(re.escape, sorted(tokens, key=len, reverse=True))) or "(?!)")


class Marker:
    """Marks every one of `tokens` in a client's string (after dropping the markers it carried), and seals a text
    rendered from marked strings."""

    def __init__(self, tokens: Iterable[str]):
        tokens = tuple(sorted(set(tokens)))
        self._pattern = _pattern(tokens)
        self._heads = frozenset(token[:k] for token in tokens for k in range(1, len(token)))
        self._tails = frozenset(token[k:] for token in tokens for k in range(1, len(token)))
        self._longest = max(map(len, tokens), default=1)

    def __call__(self, text: str) -> str:
        """`text` with its control tokens marked, and a break where it ends or begins inside one's text."""
        text = unmark(text)
        marked = self._pattern.sub(lambda match: MARK_START + match.group(0) + MARK_END, text)
        ends = range(1, min(self._longest, len(text) + 1))
        if any(text[-k:] in self._heads for k in ends):
            marked += BREAK
        if any(text[:k] in self._tails for k in ends):
            marked = BREAK + marked
        return marked

    def seal(self, rendered: str) -> str:
        """`rendered` without its breaks; a control token one lay inside (the client's fragments joined) marked."""
        if BREAK not in rendered:
            return rendered
        pieces = rendered.split(BREAK)
        cuts = list(itertools.accumulate(map(len, pieces[:-1])))
        text = "".join(pieces)

        def mark_forged(match: re.Match) -> str:
            inside = bisect.bisect_right(cuts, match.start()) < bisect.bisect_left(cuts, match.end())
            return MARK_START + match.group(0) + MARK_END if inside else match.group(0)
        return self._pattern.sub(mark_forged, text)


def control_tokens(added: dict, listed: Optional[list] = None) -> frozenset:
    """The added tokens a client's text may not produce: every special token, and those tokenizer_config.json lists
    as chat_control_tokens (transformers' _get_control_tokens). The markup tokens that are not special (Qwen's
    <think>, <tool_call>, <tool_response>) stay tokens, as apply_chat_template renders them by default: the template
    reads them in the text (an assistant turn's inline <think> block, a user turn of <tool_response> blocks), which
    transformers' inference of control tokens from the template's text would break."""
    listed = listed or ()
    return frozenset(token.content for token in added.values() if token.special or token.content in listed)


class MarkedEncoder:
    """encode_marked_chat over a tokenizers.Tokenizer: marked tokens as plain text, the rest with its added tokens."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        added = tokenizer.get_added_tokens_decoder().values()
        tokens = "|".join(map(re.escape, sorted((token.content for token in added), key=len, reverse=True))) or "(?!)"
        self._split = re.compile(f"{MARK_START}({tokens}){MARK_END}|[{MARK_START}{MARK_END}]")
        self._newline_ids = self._encode("\n")

    def _encode(self, text: str) -> list[int]:
        # encode_batch releases the GIL (encode does not): the text around a marked token may be most of a big prompt.
        return self.tokenizer.encode_batch([text], add_special_tokens=False)[0].ids

    def _encode_plain(self, text: str) -> list[int]:
        # The pipeline without its added tokens (transformers' _encode_without_added_tokens: encode_special_tokens
        # would still match the added tokens that are not special, <think> among them).
        if self.tokenizer.normalizer is not None:
            text = self.tokenizer.normalizer.normalize_str(text)
        splits = [text]
        if self.tokenizer.pre_tokenizer is not None:
            splits = [split for split, _ in self.tokenizer.pre_tokenizer.pre_tokenize_str(text)]
        return [token.id for split in splits for token in self.tokenizer.model.tokenize(split)]

    def _piece(self, piece: str, as_text: bool) -> list[int]:
        # After a newline, as transformers encodes a piece (no SentencePiece prefix space), the newline then removed.
        encode = self._encode_plain if as_text else self._encode
        ids = encode("\n" + piece)
        if ids[:len(self._newline_ids)] == self._newline_ids:
            return ids[len(self._newline_ids):]
        return encode(piece)

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text: a marked control token as its plain characters, the rest with the tokenizer's
        added tokens; markers dropped."""
        pieces = self._split.split(text)
        ids = self._encode(pieces[0])
        for index, piece in enumerate(pieces[1:], start=1):
            if piece:
                ids += self._piece(piece, index % 2 == 1)
        return ids
