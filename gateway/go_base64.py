"""Gateway process: where Go's base64.StdEncoding.Decode fails on a string, as encoding/json decodes a []byte field.

Ollama's images (api.ImageData, a []byte) are base64 in its JSON: encoding/json decodes them with
base64.StdEncoding.Decode and a string it cannot decode fails the whole request body with the decoder's error,
`illegal base64 data at input byte N` (base64.CorruptInputError), before any handler reads the request. Clients meet it
when they send a data URL ("data:image/png;base64,...": byte 4, the ':'), as ollama/ollama-js#68 and
BerriAI/litellm#18338 report it.
"""
from __future__ import annotations

import re
from typing import Optional

_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_NEWLINES = b"\r\n"
# Whole padded base64 (what decodes), and a byte no quantum can hold: the quick paths past the valid quanta.
_VALID = re.compile(rb"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_NOT_ALPHABET = re.compile(rb"[^A-Za-z0-9+/]")


def _padding_end(src: bytes, si: int, j: int) -> tuple[int, Optional[int]]:
    """After the '=' at src[si - 1], the quantum's j-th character: (next index, error offset or None), as Go's
    decodeQuantum reads the padding: a second '=' after two characters, then newlines, then the end."""
    if j < 2:
        return si, si - 1                     # incorrect padding
    if j == 2:
        while si < len(src) and src[si] in _NEWLINES:
            si += 1
        if si == len(src):
            return si, len(src)               # not enough padding
        if src[si] != ord("="):
            return si, si - 1                 # incorrect padding
        si += 1
    while si < len(src) and src[si] in _NEWLINES:
        si += 1
    return si, (si if si < len(src) else None)  # trailing garbage after the padding


def _quantum(src: bytes, si: int) -> tuple[int, Optional[int], bool]:
    """One quantum of up to four characters from si, as Go's decodeQuantum: (next index, error offset or None,
    whether the input ended)."""
    j = 0
    while j < 4:
        if si == len(src):
            # StdEncoding pads: a partial quantum at the end is corrupt where it began.
            return si, (None if j == 0 else si - j), True
        char = src[si]
        si += 1
        if char in _ALPHABET:
            j += 1
        elif char in _NEWLINES:
            continue
        elif char != ord("="):
            return si, si - 1, True
        else:
            si, error = _padding_end(src, si, j)
            return si, error, True
    return si, None, False


def base64_error(text: str) -> Optional[str]:
    """Go's error decoding `text` (its UTF-8 bytes) as standard, padded base64: 'illegal base64 data at input byte
    N', or None when it decodes."""
    src = text.encode("utf-8", "surrogatepass")
    if b"\r" in src or b"\n" in src:
        # Go skips CR and LF anywhere (MIME-wrapped base64 decodes): without them the text must be whole base64.
        if _VALID.fullmatch(src.replace(b"\r", b"").replace(b"\n", b"")):
            return None
        si = 0
    else:
        # The quanta before the first byte outside the alphabet decode: the walk starts at the quantum holding it
        # (a megabyte image is one regex scan, not a Python loop over its quanta).
        bad = _NOT_ALPHABET.search(src)
        si = ((bad.start() if bad else len(src)) // 4) * 4
    while si < len(src):
        si, error, ended = _quantum(src, si)
        if error is not None:
            return f"illegal base64 data at input byte {error}"
        if ended:
            break
    return None
