"""Gateway process: with the reasoning left out of the answer (vLLM's include_reasoning: false), the logprobs of only
the tokens whose text the client receives: a token all of whose text is reasoning, the </think> tag or the newlines
dropped after it has none, streamed or not."""
from __future__ import annotations

from typing import Optional, Sequence


class ShownLogprobs:
    """Sorts one choice's logprob entries by where their token's text falls in the output.

    The reasoning split reads text, not tokens, so each token's text is tracked by the offset where it ends in the
    output (a token whose bytes end mid-character ends where that character is completed). Once the split has
    classified text up to an offset, a token ending at or before the first answer character is hidden; one ending
    after it is shown. A token whose text the split still holds back (a tag not complete yet) waits."""

    def __init__(self):
        self._fed = 0          # characters of output text so far
        self._content = 0      # of them, answer characters the split has returned
        self._waiting: list = []   # entries of tokens whose text is not out yet
        self._queue: list = []     # (end offset, entry) not sorted yet

    def render(self, detok, token_ids: Sequence[int], entries: list, finish: bool) -> str:
        """The text of token_ids (as detok.push(token_ids), then detok.flush() at the finish), noting where each
        entry's token ends; ids past the entries (the stop token rendered with include_stop) have none."""
        pieces = []
        for i, token_id in enumerate(token_ids):
            pieces.append(self._note(entries[i] if i < len(entries) else None, detok.push([token_id])))
        if finish:
            pieces.append(self._note(None, detok.flush()))
        return "".join(pieces)

    def _note(self, entry, piece: str) -> str:
        if entry is not None:
            self._waiting.append(entry)
        if piece:
            self._fed += len(piece)
            self._queue += [(self._fed, waiting) for waiting in self._waiting]
            self._waiting = []
        return piece

    def release(self, held: int, content: int, final: bool, stop_entry: Optional[object] = None) -> list:
        """The entries now known to be shown, in order, after the split returned `content` more answer characters
        and holds `held` back; the stop token's entry (the end of the answer, as vLLM lists it) always."""
        self._content += content
        hidden_end = self._fed - held - self._content
        answered = self._content > 0
        shown, keep = [], []
        for end, entry in self._queue:
            if end <= hidden_end:
                continue
            # Before the answer, a token whose text the split still holds (a "<" that may open a tag) waits, its end
            # kept with it.
            if answered:
                shown.append(entry)
            else:
                keep.append((end, entry))
        self._queue = keep
        if final:
            shown += self._waiting if answered else []
            self._waiting = []
        return shown + ([stop_entry] if stop_entry is not None else [])
