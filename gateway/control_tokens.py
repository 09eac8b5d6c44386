"""Gateway process: control-token text inside a request's strings (messages, tools, documents, template variables)
tokenized as the characters it is, as transformers' apply_chat_template(sanitize_control_tokens=True) does it
(utils/chat_template_utils.py: mark_control_tokens, encode_marked_chat), for the special tokens.

Each control token in a client's string is wrapped in two private-use markers before the template renders it; the
template's own control tokens carry none. encode() then reads a marked token as plain text and drops the markers; a
marker the template separated from its token (a `split()`) is dropped too but still breaks the text, so the text on
either side cannot join into a control token."""
from __future__ import annotations

import functools
import re
from typing import Callable, Iterable, Optional

from tokenizers import Tokenizer

# transformers' markers (chat_template_utils._CONTROL_TOKEN_START / _END); a client's own copies are dropped.
MARK_START = "\U000f0000"
MARK_END = "\U000f0001"


def unmark(text: str) -> str:
    """`text` without markers: the prompt as the template wrote it (return_prompt_text, /apply-template)."""
    return text.replace(MARK_START, "").replace(MARK_END, "") if MARK_START in text or MARK_END in text else text


@functools.lru_cache(maxsize=64)
def _pattern(tokens: tuple) -> re.Pattern:
    # Longer tokens first, so that a token wins over the tokens it contains; "(?!)" never matches.
    return re.compile("|".join(map(re.escape, sorted(tokens, key=len, reverse=True))) or "(?!)")


def marker(tokens: Iterable[str]) -> Callable[[str], str]:
    """The function that marks every one of `tokens` in a string (after dropping the markers it carried)."""
    pattern = _pattern(tuple(sorted(set(tokens))))

    def mark(text: str) -> str:
        return pattern.sub(lambda match: MARK_START + match.group(0) + MARK_END, unmark(text))
    return mark


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
