"""Gateway process: Ollama's per-request `template` on /api/generate, a Go text/template, rendered for the subset
Ollama's prompt templates use: {{ .Field }} and {{ $.Field }}, if / else if / else / end, range (with `$i, $v :=`)
with break / continue, with, $variables (declared with :=, set with =, as Go scopes them), true/false/nil, Go's
builtin functions and Ollama's (gateway.ollama_template_funcs), and the {{- -}} trims (parsed by
gateway.ollama_template_parse). As Ollama executes it, the prompt ends at the first {{ .Response }}. Any other action
is a 400 naming it."""
from __future__ import annotations

import json
import re
from typing import Any

from gateway.control_tokens import Marker
from gateway.ollama_template_funcs import CONSTANTS, FUNCTIONS, UNREAD_BUILTINS, text, truth
from gateway.ollama_template_parse import fail as _fail
from gateway.ollama_template_parse import NUMBER, parse

_MAX_OUTPUT = 1 << 22   # characters of prompt
_MAX_STEPS = 1 << 20    # nodes run (nested ranges multiply)


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


class _Break(Exception):
    """{{ break }}: the innermost range ends."""


class _Continue(Exception):
    """{{ continue }}: the innermost range goes on with its next element."""


class _Scope:
    """Go's variable stack (text/template exec.go): {{ $x := v }} pushes $x, {{ $x = v }} sets the nearest $x, and
    if, with and each range pass drop what was pushed inside them, so a set inside a block changes the variable
    declared outside it (Ollama's alpaca and vicuna templates gather the system prompt so)."""

    def __init__(self, data: dict, cut: bool):
        self.variables, self.cut = [["$", data]], cut

    def mark(self) -> int:
        return len(self.variables)

    def pop(self, mark: int) -> None:
        del self.variables[mark:]

    def declare(self, name: str, value: Any) -> None:
        self.variables.append([name, value])

    def _find(self, name: str) -> list:
        for variable in reversed(self.variables):
            if variable[0] == name:
                return variable
        raise _fail(f"undefined variable {name}")

    def set(self, name: str, value: Any) -> None:
        self._find(name)[1] = value

    def get(self, name: str) -> Any:
        return self._find(name)[1]


def generate_prompt(source: str, system: str, prompt: str, think: dict, protect: Marker) -> str:
    """The prompt of an /api/generate `template`, as Ollama's GenerateHandler and template.Execute build it: the
    messages are the system prompt (if any) and the user's prompt; a template that reads .Messages gets them (and
    .System) and renders whole, any other gets .System and .Prompt and ends at its first {{ .Response }}. The texts
    are protected, so special tokens in them stay text (the template's own are control tokens). `think`: the
    think_values."""
    system, prompt = protect(system), protect(prompt)
    messages = ([{"Role": "system", "Content": system}] if system else []) + [{"Role": "user", "Content": prompt}]
    data = {"System": system, "Prompt": prompt, "Response": "", "Messages": messages, "Tools": None, **think}
    return protect.seal(render(source, data, cut=not re.search(r"\.Messages\b", source)))


def render(source: str, data: dict, cut: bool = True) -> str:
    """The prompt `source` renders to with `data` (Ollama's System, Prompt, Messages, ...), cut at .Response."""
    out = _Out()
    try:
        _run(parse(source), _Scope(data, cut), data, out)
    except _Cut:
        pass
    return "".join(out.parts)


def _run(nodes: list, scope: _Scope, dot: Any, out: _Out) -> None:
    for node in nodes:
        out.step()
        if isinstance(node, str):
            out.write(node)
        elif node[0] == "out":
            if scope.cut and node[1] in ([".Response"], ["$.Response"]):
                raise _Cut()
            out.write(text(_call(node[1], scope, dot)))
        elif node[0] == "declare":
            scope.declare(node[1], _call(node[2], scope, dot))
        elif node[0] == "set":
            scope.set(node[1], _call(node[2], scope, dot))
        elif node[0] == "range":
            _range(node, scope, dot, out)
        elif node[0] == "break":
            raise _Break()
        elif node[0] == "continue":
            raise _Continue()
        else:
            _branch(node, scope, dot, out)


def _branch(node: tuple, scope: _Scope, dot: Any, out: _Out) -> None:
    """if / with and their else if / else with chain: the first branch whose value is true runs (a with's with that
    value as dot); a variable a condition declares lives to the chain's end."""
    _, branches, else_body = node
    mark = scope.mark()
    for word, name, condition, body in branches:
        value = _call(condition, scope, dot)
        if name is not None:
            scope.declare(name, value)
        if truth(value):
            _run(body, scope, value if word == "with" else dot, out)
            break
    else:
        _run(else_body, scope, dot, out)
    scope.pop(mark)


def _range(node: tuple, scope: _Scope, dot: Any, out: _Out) -> None:
    _, names, expr, body, else_body = node
    items = _call(expr, scope, dot) or []
    pairs = list(items.items() if isinstance(items, dict) else enumerate(items if isinstance(items, list) else []))
    mark = scope.mark()
    if not pairs:
        _run(else_body, scope, dot, out)
        scope.pop(mark)
    for key, item in pairs:
        if len(names) == 2:
            scope.declare(names[0], key)
            scope.declare(names[1], item)
        elif names:
            scope.declare(names[0], item)
        try:
            _run(body, scope, item, out)
        except _Continue:
            pass
        except _Break:
            break
        finally:
            scope.pop(mark)


def _call(command: list, scope: _Scope, dot: Any) -> Any:
    head = command[0]
    if isinstance(head, str) and head in FUNCTIONS:
        try:
            return FUNCTIONS[head](*[_value(t, scope, dot) for t in command[1:]])
        except (TypeError, ValueError, IndexError) as exc:
            raise _fail(f"wrong number or type of arguments for {head}") from exc
    if len(command) != 1:
        raise _fail(_undefined(head))
    return _value(head, scope, dot)


def _undefined(head: Any) -> str:
    if isinstance(head, str) and re.fullmatch(r"[A-Za-z_]\w*", head) and head not in UNREAD_BUILTINS:
        return f'function "{head}" not defined'
    return f"unsupported function {head!r}"


def _value(term: Any, scope: _Scope, dot: Any) -> Any:
    if isinstance(term, list):
        return _call(term, scope, dot)
    if isinstance(term, tuple):
        return _field(_call(term[1], scope, dot), term[2])
    if term.startswith('"'):
        try:
            return json.loads(term)
        except ValueError as exc:
            raise _fail(f"bad string constant {term}") from exc
    number = NUMBER.fullmatch(term)
    if number:
        return float(term) if number.group(1) or number.group(2) else int(term)
    if term == ".":
        return dot
    if term in CONSTANTS:
        return CONSTANTS[term]
    if not term.startswith((".", "$")):
        # A bare word is a function, called with no arguments (it rendered as nothing before: {{ currentDate }}).
        if term not in FUNCTIONS:
            raise _fail(_undefined(term))
        return _call([term], scope, dot)
    base, _, path = term.partition(".") if term.startswith("$") else ("", "", term[1:])
    return _field(scope.get(base) if base else dot, path)


def _field(value: Any, path: str) -> Any:
    """value.A.B: each name a key of a map (a missing one, or a field of a non-map, is nil)."""
    for name in filter(None, path.split(".")):
        value = value.get(name) if isinstance(value, dict) else None
    return value
