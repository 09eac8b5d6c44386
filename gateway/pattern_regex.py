"""Gateway process: a JSON Schema `pattern` as the whole-text regex a grammar lexeme needs.

JSON Schema reads a pattern as a search (ECMA-262, unanchored): "^x" is any text that starts with x, "ab$" any that
ends with ab, "x" any that holds an x. A grammar lexeme matches the whole text, and llguidance's regexes take no
^ / $ assertions, so each top-level alternative keeps the anchors it has by dropping them and gets "any text" on each
side it leaves open (as llguidance's own JSON compiler reads a string's pattern).
"""
from __future__ import annotations

from typing import Iterator, Optional

_ANY = "(?s:.*)"


def _syntax(pattern: str) -> Iterator[tuple[int, str, int]]:
    """(index, character, group depth) of each character that is regex syntax: not escaped, not in a class."""
    depth, in_class, i = 0, False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            # A ']' right after '[' (or '[^') is a member, not the class's end.
            i += 1 if pattern[i + 1:i + 2] == "^" else 0
            i += 1 if pattern[i + 1:i + 2] == "]" else 0
        else:
            depth += (char == "(") - (char == ")")
            yield i, char, depth
        i += 1


def _alternatives(pattern: str) -> list[str]:
    """The pattern's top-level alternatives: split at each `|` outside groups, classes and escapes."""
    cuts = [i for i, char, depth in _syntax(pattern) if char == "|" and depth == 0]
    bounds = [-1] + cuts + [len(pattern)]
    return [pattern[a + 1:b] for a, b in zip(bounds, bounds[1:])]


def whole_text_regex(pattern: str) -> Optional[str]:
    """The regex of the texts `pattern` finds a match in, written to match whole texts; None when an alternative
    holds an anchor elsewhere than at its ends ("a^b", "(^a)"), which no whole-text regex here can say."""
    out = []
    for alternative in _alternatives(pattern):
        anchors = [i for i, char, _ in _syntax(alternative) if char in "^$"]
        left = 0 in anchors and alternative[0] == "^"
        right = len(alternative) - 1 in anchors and alternative[-1] == "$"
        if len(anchors) != left + right:
            return None
        core = alternative[1 if left else 0:len(alternative) - 1 if right else len(alternative)]
        out.append(("" if left else _ANY) + f"(?:{core})" + ("" if right else _ANY))
    return "|".join(out)


def whole_text_regex_is_closed(whole: str) -> bool:
    """Whether a whole_text_regex answer leaves no side open ("any text" added nowhere)."""
    return _ANY not in whole
