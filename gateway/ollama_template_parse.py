"""Gateway process: Ollama's per-request Go text/template (/api/generate `template`) parsed into nodes for
gateway.ollama_template to run; any action outside the subset it reads is a 400 naming it."""
from __future__ import annotations

import re

from gateway.errors import InvalidRequest

_TRIM_LEFT, _TRIM_RIGHT = re.compile(r"-\s"), re.compile(r"\s-\Z")
_TERM = re.compile(r'\s*(\(|\)|\||"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\$?[A-Za-z_]*(?:\.[A-Za-z_]\w*)+|'
                   r'\$\w*|\.|[A-Za-z_]\w*)')
# A number constant: an integer, or a float with a fraction or an exponent (Go's 1.5, 2e3).
NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
# {{ $x := v }} declares $x in the block it stands in; {{ $x = v }} sets the $x declared before it.
_VARIABLE = re.compile(r"(\$\w+)\s*(:?=)(.*)", re.S)
_BLOCKS = ("if", "range", "with")
_MAX_DEPTH = 64         # blocks inside blocks (the parser and the renderer recurse per level)
_MAX_EXPRESSION_DEPTH = 2 * _MAX_DEPTH    # commands inside one action: parentheses and pipeline stages


def fail(message: str) -> InvalidRequest:
    """The InvalidRequest (400, param template) for a per-request template this reader cannot parse or run."""
    return InvalidRequest(f"template: {message}", param="template")


def parse(source: str) -> list:
    """The template as nodes: str, ("out", expr), ("declare"|"set", name, expr), ("if", [("if"|"with", declared
    name or None, expr, body), ...], else_body), ("range", names, expr, body, else_body), ("break",), ("continue",)."""
    pieces, last = [], 0
    for start, end in _actions(source):
        inner = source[start + 2:end]
        left = _TRIM_LEFT.match(inner)
        right = _TRIM_RIGHT.search(inner, 2 if left else 0)
        text = source[last:start]
        pieces.append(text.rstrip() if left else text)
        pieces.append(("action", inner[2 if left else 0:right.start() if right else None].strip(), bool(right)))
        last = end + 2
    pieces.append(source[last:])
    for i, piece in enumerate(pieces):   # a -}} trims the text after it
        if isinstance(piece, tuple) and piece[2] and i + 1 < len(pieces):
            pieces[i + 1] = pieces[i + 1].lstrip()
    _check_depth(pieces)
    return _block(pieces, 0, top=True)[0]


def _actions(source: str):
    """(index of {{, index of its }}) for each action, in one pass over the text: a regex's lazy scan for }} from
    every {{ read an unclosed template in quadratic time (20 KB of "{{" held the gateway's loop 7 s)."""
    start = source.find("{{")
    while start >= 0:
        end = source.find("}}", start + 2)
        # A {{ with no }} after it: Go's lexer fails "unclosed action" (Ollama answers the parse error); read as
        # text, the template's own markup went into the prompt and the request was answered.
        if end < 0:
            raise fail("unclosed action")
        yield start, end
        start = source.find("{{", end + 2)


def _check_depth(pieces: list) -> None:
    depth = 0
    for piece in pieces:
        word = piece[1].split(None, 1)[0] if isinstance(piece, tuple) and piece[1] else ""
        depth += 1 if word in _BLOCKS else -1 if word == "end" else 0
        if depth > _MAX_DEPTH:
            raise fail(f"blocks nest more than {_MAX_DEPTH} deep")


def _block(pieces: list, i: int, top: bool = False, in_range: bool = False) -> tuple[list, int]:
    """Nodes up to the next end / else at this level; returns (nodes, index of that action). in_range: inside a
    range's body, where {{ break }} and {{ continue }} may stand (Go's parser refuses them elsewhere)."""
    nodes = []
    while i < len(pieces):
        piece = pieces[i]
        if isinstance(piece, str):
            nodes.append(piece) if piece else None
            i += 1
            continue
        action = piece[1]
        word = action.split(None, 1)[0] if action else ""
        if action.startswith("/*"):
            i += 1
        elif word in ("end", "else"):
            if top:
                raise fail(f"unexpected {{{{ {action} }}}}")
            return nodes, i
        elif word in _BLOCKS:
            node, i = _block_node(pieces, i, word, action[len(word):].strip(), in_range)
            nodes.append(node)
        elif action in ("break", "continue"):
            if not in_range:
                raise fail(f"{{{{{action}}}}} outside {{{{range}}}}")
            nodes.append((action,))
            i += 1
        else:
            variable = _VARIABLE.match(action)
            if variable:
                kind = "declare" if variable.group(2) == ":=" else "set"
                nodes.append((kind, variable.group(1), _expr(variable.group(3))))
            else:
                nodes.append(("out", _expr(action)))
            i += 1
    if not top:
        raise fail("a block has no {{ end }}")
    return nodes, i


def _block_node(pieces: list, i: int, word: str, rest: str, in_range: bool) -> tuple[tuple, int]:
    if word == "range":
        names, _, rest = rest.rpartition(":=") if ":=" in rest else ("", "", rest)
        body, i = _block(pieces, i + 1, in_range=True)
        else_body, i = _else_body(pieces, i, in_range)
        return ("range", [n.strip() for n in names.split(",") if n.strip()], _expr(rest), body, else_body), i
    branches = []
    while True:
        body, i = _block(pieces, i + 1, in_range=in_range)
        branches.append((word, *_condition(rest), body))
        action = pieces[i][1]
        chained = re.match(r"else\s+(if|with)\s+(.*)", action, re.S)
        if not chained:
            else_body, i = _else_body(pieces, i, in_range)
            return ("if", branches, else_body), i
        word, rest = chained.groups()


def _condition(text: str) -> tuple:
    """(the variable it declares or None, its command): {{ if $x := .Foo }} declares $x for the whole if."""
    variable = _VARIABLE.match(text)
    if variable and variable.group(2) == ":=":
        return variable.group(1), _expr(variable.group(3))
    return None, _expr(text)


def _else_body(pieces: list, i: int, in_range: bool) -> tuple[list, int]:
    """The nodes of the {{ else }} at pieces[i] up to its {{ end }} ([] at an {{ end }}); returns them and the index
    after that end."""
    action = pieces[i][1]
    if action == "end":
        return [], i + 1
    if action != "else":
        raise fail(f"unsupported action {{{{ {action} }}}}")
    body, i = _block(pieces, i + 1, in_range=in_range)
    if pieces[i][1] != "end":
        raise fail("an else needs an {{ end }}")
    return body, i + 1


def _piped(command: list, stages: list, text: str) -> list:
    """A pipeline as the one command Go runs: each stage's result is the last argument of the next (.Prompt | printf
    "%q" is printf "%q" .Prompt), the stages before `command` given in order."""
    if not command or not all(stages):
        raise fail(f"missing command in {{{{ {text} }}}}")
    result = stages[0] if stages else command
    for stage in [*stages[1:], command] if stages else []:
        result = [*stage, result]
    return result


def _expr(text: str) -> list:
    """A command as nested lists of terms: ["eq", ".Role", '"user"'], a parenthesized command a list, and a field of
    its result ((index .Messages 0).Content) the tuple ("field", [command], ".Content"); a pipeline is the command it
    amounts to (_piped)."""
    stack, pipes, pos = [[]], [[]], 0
    while pos < len(text.rstrip()):
        match = _TERM.match(text, pos)
        if not match or not match.group(1):
            raise fail(f"unsupported action {{{{ {text} }}}}")
        term, closed, pos = match.group(1), text[match.start(1) - 1:match.start(1)] == ")", match.end()
        if closed and term.startswith(".") and len(term) > 1 and isinstance(stack[-1][-1:] or None, list):
            stack[-1][-1] = ("field", stack[-1][-1], term)
        elif term == "(" and len(stack) > _MAX_DEPTH:
            # The renderer recurses per level: thousands deep ran out of stack (a 500). Go's parser bounds these
            # too ("max expression depth exceeded").
            raise fail(f"parentheses nest more than {_MAX_DEPTH} deep")
        elif term == "(":
            stack.append([])
            pipes.append([])
        elif term == "|":
            pipes[-1].append(stack[-1])
            stack[-1] = []
        elif term == ")" and len(stack) > 1:
            inner = _piped(stack.pop(), pipes.pop(), text)
            stack[-1].append(inner)
        elif term == ")":
            raise fail(f"unbalanced parentheses in {{{{ {text} }}}}")
        else:
            stack[-1].append(term)
    if len(stack) != 1 or not stack[0] and not pipes[0]:
        raise fail(f"unsupported action {{{{ {text} }}}}")
    command = _piped(stack[0], pipes[0], text)
    # A pipeline runs as nested calls here (each stage the next one's argument), which the renderer recurses through:
    # 5000 stages ran out of stack (a 500). Go runs a pipeline's stages in turn; its parser bounds nesting alone.
    if _nesting(command) > _MAX_EXPRESSION_DEPTH:
        raise fail(f"max expression depth exceeded: pipelines and parentheses nest more than {_MAX_EXPRESSION_DEPTH} "
                   f"deep in {{{{ {text[:80]} }}}}")
    return command


def _nesting(command) -> int:
    """How deep a command's lists and field tuples nest (walked without recursion: a deep one is what it measures)."""
    deepest, todo = 0, [(command, 1)]
    while todo and deepest <= _MAX_EXPRESSION_DEPTH:
        node, level = todo.pop()
        deepest = max(deepest, level)
        todo.extend((child, level + 1) for child in node if isinstance(child, (list, tuple)))
    return deepest
