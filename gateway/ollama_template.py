"""Gateway process: Ollama's per-request `template` on /api/generate, a Go text/template, rendered for the subset
Ollama's prompt templates use: {{ .Field }} and {{ $.Field }}, if / else if / else / end, range (with `$i, $v :=`),
with, $variables, true/false/nil, the functions not, and, or, eq, ne, len, slice and Ollama's currentDate,
yesterdayDate, json, and the {{- -}} trims. As Ollama executes it, the prompt ends at the first {{ .Response }}.
Any other action is a 400 naming it."""
from __future__ import annotations

import datetime
import json
import re
from typing import Any, Callable

from gateway.errors import InvalidRequest

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
_TERM = re.compile(r'\s*(\(|\)|"(?:[^"\\]|\\.)*"|-?\d+|\$?[A-Za-z_]*(?:\.[A-Za-z_]\w*)+|\$\w*|\.|[A-Za-z_]\w*)')
_BLOCKS = ("if", "range", "with")
_MAX_OUTPUT = 1 << 22   # characters of prompt
_MAX_STEPS = 1 << 20    # nodes run (nested ranges multiply)
_MAX_DEPTH = 64         # blocks inside blocks (the parser and the renderer recurse per level)


class _Out:
    """The text written so far, with budgets that keep a template's loops from holding a thread."""

    def __init__(self):
        self.parts, self.size, self.steps = [], 0, 0

    def write(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def step(self) -> None:
        self.steps += 1
        if self.size > _MAX_OUTPUT or self.steps > _MAX_STEPS:
            raise _fail("the template renders too long a prompt")


class _Cut(Exception):
    """{{ .Response }} reached: the prompt is what was written before it."""


def _fail(message: str) -> InvalidRequest:
    return InvalidRequest(f"template: {message}", param="template")


def parse(source: str) -> list:
    """The template as nodes: str, ("out", expr), ("if"|"with", [(expr, body), ...], else_body),
    ("range", names, expr, body)."""
    pieces, last = [], 0
    for match in _ACTION.finditer(source):
        text = source[last:match.start()]
        pieces.append(text.rstrip() if match.group(1) else text)
        pieces.append(("action", match.group(2).strip(), bool(match.group(3))))
        last = match.end()
    pieces.append(source[last:])
    for i, piece in enumerate(pieces):   # a -}} trims the text after it
        if isinstance(piece, tuple) and piece[2] and i + 1 < len(pieces):
            pieces[i + 1] = pieces[i + 1].lstrip()
    _check_depth(pieces)
    return _block(pieces, 0, top=True)[0]


def _check_depth(pieces: list) -> None:
    depth = 0
    for piece in pieces:
        word = piece[1].split(None, 1)[0] if isinstance(piece, tuple) and piece[1] else ""
        depth += 1 if word in _BLOCKS else -1 if word == "end" else 0
        if depth > _MAX_DEPTH:
            raise _fail(f"blocks nest more than {_MAX_DEPTH} deep")


def _block(pieces: list, i: int, top: bool = False) -> tuple[list, int]:
    """Nodes up to the next end / else at this level; returns (nodes, index of that action)."""
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
                raise _fail(f"unexpected {{{{ {action} }}}}")
            return nodes, i
        elif word in _BLOCKS:
            node, i = _block_node(pieces, i, word, action[len(word):].strip())
            nodes.append(node)
        else:
            assign = re.match(r"(\$\w+)\s*:?=(.*)", action, re.S)
            nodes.append(("set", assign.group(1), _expr(assign.group(2))) if assign else ("out", _expr(action)))
            i += 1
    if not top:
        raise _fail("a block has no {{ end }}")
    return nodes, i


def _block_node(pieces: list, i: int, word: str, rest: str) -> tuple[tuple, int]:
    if word == "range":
        names, _, rest = rest.rpartition(":=") if ":=" in rest else ("", "", rest)
        body, i = _block(pieces, i + 1)
        if pieces[i][1] != "end":
            raise _fail("range ... else is not supported")
        return ("range", [n.strip() for n in names.split(",") if n.strip()], _expr(rest), body), i + 1
    branches, else_body = [], []
    condition = rest
    while True:
        body, i = _block(pieces, i + 1)
        branches.append((_expr(condition), body))
        action = pieces[i][1]
        if action == "end":
            return (word, branches, else_body), i + 1
        if action.startswith("else if "):
            condition = action[len("else if "):]
            continue
        if action != "else":
            raise _fail(f"unsupported action {{{{ {action} }}}}")
        else_body, i = _block(pieces, i + 1)
        if pieces[i][1] != "end":
            raise _fail("an else needs an {{ end }}")
        return (word, branches, else_body), i + 1


def _expr(text: str) -> list:
    """A command as nested lists of terms: ["eq", ".Role", '"user"'], a parenthesized command a list."""
    stack, pos = [[]], 0
    while pos < len(text.rstrip()):
        match = _TERM.match(text, pos)
        if not match or not match.group(1):
            raise _fail(f"unsupported action {{{{ {text} }}}}")
        term, pos = match.group(1), match.end()
        if term == "(":
            stack.append([])
        elif term == ")" and len(stack) > 1:
            inner = stack.pop()
            stack[-1].append(inner)
        elif term == ")":
            raise _fail(f"unbalanced parentheses in {{{{ {text} }}}}")
        else:
            stack[-1].append(term)
    if len(stack) != 1 or not stack[0]:
        raise _fail(f"unsupported action {{{{ {text} }}}}")
    return stack[0]


def generate_prompt(source: str, system: str, prompt: str, think: dict, protect: Callable[[str], str]) -> str:
    """The prompt of an /api/generate `template`, as Ollama's GenerateHandler and template.Execute build it: the
    messages are the system prompt (if any) and the user's prompt; a template that reads .Messages gets them (and
    .System) and renders whole, any other gets .System and .Prompt and ends at its first {{ .Response }}. The texts
    are protected, so special tokens in them stay text (the template's own are control tokens). `think`: the
    think_values."""
    system, prompt = protect(system), protect(prompt)
    messages = ([{"Role": "system", "Content": system}] if system else []) + [{"Role": "user", "Content": prompt}]
    data = {"System": system, "Prompt": prompt, "Response": "", "Messages": messages, "Tools": None, **think}
    return render(source, data, cut=not re.search(r"\.Messages\b", source))


def render(source: str, data: dict, cut: bool = True) -> str:
    """The prompt `source` renders to with `data` (Ollama's System, Prompt, Messages, ...), cut at .Response."""
    out = _Out()
    try:
        _run(parse(source), {"$": data, "cut": cut}, data, out)
    except _Cut:
        pass
    return "".join(out.parts)


def _run(nodes: list, scope: dict, dot: Any, out: _Out) -> None:
    for node in nodes:
        out.step()
        if isinstance(node, str):
            out.write(node)
        elif node[0] == "out":
            if scope["cut"] and node[1] in ([".Response"], ["$.Response"]):
                raise _Cut()
            out.write(_text(_call(node[1], scope, dot)))
        elif node[0] == "set":
            scope[node[1]] = _call(node[2], scope, dot)
        elif node[0] == "range":
            _range(node, scope, dot, out)
        else:
            _branch(node, scope, dot, out)


def _branch(node: tuple, scope: dict, dot: Any, out: _Out) -> None:
    word, branches, else_body = node
    for condition, body in branches:
        value = _call(condition, scope, dot)
        if _truth(value):
            _run(body, scope, value if word == "with" else dot, out)
            return
    _run(else_body, scope, dot, out)


def _range(node: tuple, scope: dict, dot: Any, out: _Out) -> None:
    _, names, expr, body = node
    items = _call(expr, scope, dot) or []
    pairs = items.items() if isinstance(items, dict) else enumerate(items if isinstance(items, list) else [])
    for key, item in pairs:
        inner = dict(scope)
        if len(names) == 2:
            inner[names[0]], inner[names[1]] = key, item
        elif names:
            inner[names[0]] = item
        _run(body, inner, item, out)


_FUNCTIONS = {
    "not": lambda a: not _truth(a),
    "and": lambda *a: next((v for v in a if not _truth(v)), a[-1]),
    "or": lambda *a: next((v for v in a if _truth(v)), a[-1]),
    "eq": lambda a, *b: any(a == v for v in b),
    "ne": lambda a, b: a != b,
    "len": lambda a: len(a or ()),
    "slice": lambda a, start=None, stop=None: (a or [])[start:stop],
    # Ollama's own (template/template.go funcs); a date format argument is ignored there too.
    "currentDate": lambda *_: datetime.date.today().isoformat(),
    "yesterdayDate": lambda *_: (datetime.date.today() - datetime.timedelta(days=1)).isoformat(),
    "json": lambda a: _go_json(a),
}
# Go's predefined constants, and its functions and actions not read here (any other name is Go's "not defined").
_CONSTANTS = {"true": True, "false": False, "nil": None}
_GO_BUILTINS = frozenset("call html index js print printf println urlquery lt le gt ge template define block".split())


def _go_json(value: Any) -> str:
    """Go's json.Marshal: compact, a message's fields by their json names, <, >, & escaped as Go does for HTML."""
    value = [_json_names(item) for item in value] if isinstance(value, list) else _json_names(value)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return re.sub("[<>&\u2028\u2029]", lambda match: f"\\u{ord(match.group()):04x}", text)


def _json_names(value: Any) -> Any:
    return {key[:1].lower() + key[1:]: item for key, item in value.items()} if isinstance(value, dict) else value


def _call(command: list, scope: dict, dot: Any) -> Any:
    head = command[0]
    if isinstance(head, str) and head in _FUNCTIONS:
        try:
            return _FUNCTIONS[head](*[_value(t, scope, dot) for t in command[1:]])
        except (TypeError, ValueError, IndexError) as exc:
            raise _fail(f"wrong number or type of arguments for {head}") from exc
    if len(command) != 1:
        raise _fail(_undefined(head))
    return _value(head, scope, dot)


def _undefined(head: Any) -> str:
    if isinstance(head, str) and re.fullmatch(r"[A-Za-z_]\w*", head) and head not in _GO_BUILTINS:
        return f'function "{head}" not defined'
    return f"unsupported function {head!r}"


def _value(term: Any, scope: dict, dot: Any) -> Any:
    if isinstance(term, list):
        return _call(term, scope, dot)
    if term.startswith('"'):
        try:
            return json.loads(term)
        except ValueError as exc:
            raise _fail(f"bad string constant {term}") from exc
    if term.lstrip("-").isdigit():
        return int(term)
    if term == ".":
        return dot
    if term in _CONSTANTS:
        return _CONSTANTS[term]
    if not term.startswith((".", "$")):
        # A bare word is a function, called with no arguments (it rendered as nothing before: {{ currentDate }}).
        if term not in _FUNCTIONS:
            raise _fail(_undefined(term))
        return _call([term], scope, dot)
    base, _, path = term.partition(".") if term.startswith("$") else ("", "", term[1:])
    if base:
        if base not in scope:
            raise _fail(f"undefined variable {base}")
        value = scope[base]
    else:
        value = dot
    for name in filter(None, path.split(".")):
        value = value.get(name) if isinstance(value, dict) else None
    return value


def _truth(value: Any) -> bool:
    return bool(value) if value is not None else False


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)
