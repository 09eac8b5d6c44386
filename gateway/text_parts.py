"""Gateway process: a text built a piece at a time (an answer, a block, a call's arguments), kept as its pieces."""
from __future__ import annotations


class TextParts:
    """A text that grows by pieces: add keeps each piece, str() joins them (once: the join is kept).

    `text += piece` on an attribute or a dict item copies the whole text for every piece (CPython grows a string in
    place only through a local name that holds it alone): a 32k-token answer copied ~128 kB a token, O(n^2) over
    the answer (bench/long_output.py).
    """
    __slots__ = ("_parts",)

    def __init__(self, text: str = ""):
        self._parts = [text] if text else []

    def add(self, piece: str) -> None:
        """Appends a non-empty piece."""
        if piece:
            self._parts.append(piece)

    def __str__(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def __bool__(self) -> bool:
        return bool(self._parts)
