"""Gateway process: jsonschema's error messages made fit to send back. jsonschema words an error with the Python repr
of the offending value and of the schema's values ("True is not of type 'object'", "None is not one of ['a']"),
whole: a 30 MiB string sent as `messages` came back in a 30 MiB error body, and a value deep in a tool schema filled
the message with the whole subtree (vLLM #49239 is the same kind of fault in pydantic's errors). Here those values are
written as the JSON the client sent (true, null, "x"), and a long one shortened as reprlib (the standard library's
bounded repr) shortens."""
from __future__ import annotations

import json
import re
import reprlib
from typing import Any, Optional

from jsonschema.exceptions import relevance

# The longest a message may get once the value is shortened (enum lists and patterns are ours, and short).
MAX_MESSAGE = 1000


class _JsonRepr(reprlib.Repr):
    """reprlib's bounded repr in JSON spelling: strings double-quoted with JSON escapes, true / false, null."""

    def repr_str(self, value: str, level: int) -> str:
        if len(value) <= self.maxstring:
            return json.dumps(value, ensure_ascii=False)
        keep = max(0, (self.maxstring - 3) // 2)
        return json.dumps(value[:keep], ensure_ascii=False)[:-1] + "..." + json.dumps(
            value[len(value) - keep:], ensure_ascii=False)[1:]

    def repr_bool(self, value: bool, level: int) -> str:
        return "true" if value else "false"

    def repr_NoneType(self, value: None, level: int) -> str:
        return "null"


_SHORT = _JsonRepr()
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlist, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 2, 4, 4, 60, 60, 60
_FULL = _JsonRepr()
_FULL.maxlevel = _FULL.maxdict = _FULL.maxlist = _FULL.maxtuple = _FULL.maxstring = _FULL.maxlong = 10 ** 9
_FULL.maxother = 10 ** 9


def short_repr(value) -> str:
    """The value as JSON text, bounded: a long string keeps its ends, a deep or long container its first items."""
    text = json_repr(value) if not isinstance(value, (str, list, dict)) or len(value) <= 64 else None
    return text if text is not None and len(text) <= 60 else _SHORT.repr(value)


def json_repr(value) -> str:
    """The value as JSON text, whole (the schema's own values: enum lists, patterns, property names)."""
    return _FULL.repr(value)


def _members(value) -> list:
    return list(value)[:256] if isinstance(value, (list, tuple, dict)) else []


def _values(error: Any) -> list:
    """(value, shortened) for each value jsonschema's wording may show: the offending value and its members or keys
    (a required or unexpected property's name), shortened; the schema's value for the failed keyword and its
    members, whole."""
    return ([(value, True) for value in [error.instance] + _members(error.instance)]
            + [(value, False) for value in [error.validator_value] + _members(error.validator_value)])


def json_spelling(message: str, values: list) -> str:
    """message with each Python repr of these (value, shortened) written as JSON (True -> true, None -> null, 'x' ->
    "x"), the longest first and in one pass, so a replaced value is not read again."""
    pairs: dict = {}
    for value, shortened in values:
        try:
            python = repr(value)
        except RecursionError:
            continue
        if python in message and python not in pairs:
            pairs[python] = short_repr(value) if shortened else json_repr(value)
    # Not one regular expression of the values (an alternation of each re.escape'd repr): the values are the client's,
    # and re compiles a pattern in Python, so a 2 MB string sent as a role took 10 s of CPU to word its 400 (and re's
    # cache kept the compiled pattern). The text is cut at each repr instead, the longest first, only in the parts
    # not replaced yet.
    parts = [(message, False)]
    for python in sorted((python for python, text in pairs.items() if python != text), key=len, reverse=True):
        parts = [piece for text, done in parts for piece in
                 ([(text, True)] if done else _replaced(text, python, pairs[python]))]
    return "".join(text for text, _ in parts)


def _replaced(text: str, old: str, new: str) -> list:
    """text as (part, replaced) pieces, each occurrence of old a (new, True) piece between the others."""
    pieces = []
    for index, part in enumerate(text.split(old)):
        if index:
            pieces.append((new, True))
        pieces.append((part, False))
    return pieces


def error_message(error: Any) -> str:
    """A jsonschema ValidationError's (or SchemaError's) message with its values in JSON spelling and the offending
    one shortened, at most MAX_MESSAGE characters."""
    message = _kinds_message(error) or json_spelling(error.message, _values(error))
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "..."


def _alternatives(error: Any) -> dict:
    """An anyOf / oneOf error's sub-errors, by the alternative (its index in the list) each came from."""
    groups: dict = {}
    for sub in error.context:
        groups.setdefault(sub.relative_schema_path[0], []).append(sub)
    return groups


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value (integers and floats both numbers)."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else "boolean"
    kinds = ((int, "number"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"))
    return next((kind for cls, kind in kinds if isinstance(value, cls)), "other")


def _refuses_kind(sub: Any) -> bool:
    """Whether a sub-error refuses the value itself for its JSON type: a `type` it is not, or an `enum` / `const`
    whose members are all of other types (tool_choice's words beside an object)."""
    if sub.relative_path or sub.validator not in ("type", "enum", "const"):
        return False
    if sub.validator == "type":
        return True
    members = sub.validator_value if sub.validator == "enum" else [sub.validator_value]
    return isinstance(members, list) and _json_type(sub.instance) not in {_json_type(m) for m in members}


def _of_other_kind(errors: list) -> bool:
    """Whether an alternative refused the value for its JSON type alone (the value is not of its kind at all)."""
    return any(_refuses_kind(sub) for sub in errors)


def _progress(error: Any) -> tuple:
    """How far into the value an alternative got before it failed: deeper, then at a later list item, then past the
    item's type (prompt [[]]: an empty list of token ids, rather than no string)."""
    path = error.absolute_path
    return len(path), [part if isinstance(part, int) else -1 for part in path], error.validator != "type"


def best_error(errors: Any) -> Optional[Any]:
    """The error that says best why a value was refused, or None: jsonschema's pick among the errors (best_match's),
    and inside an anyOf / oneOf ("'strng' is not valid under any of the given schemas", no reason) the reason of the
    alternative of the value's own kind ("'strng' is not one of ['array', ...]"), the one its tag names where the
    alternatives are told apart by one ({"type": "function"}), else the one that got furthest into the value. A value
    of none of the alternatives' kinds keeps the anyOf error, which error_message words as the kinds it may be."""
    best = max(errors, key=relevance, default=None)
    return None if best is None else _descend(best)


def _descend(error: Any) -> Any:
    if not error.context:
        return error
    same_kind = [group for group in _alternatives(error).values() if not _of_other_kind(group)]
    if not same_kind:
        return error
    tagged = [group for group in same_kind if not any(_wrong_tag(sub) for sub in group)]
    return max((_descend(max(group, key=relevance)) for group in tagged or same_kind), key=_progress)


def _wrong_tag(sub: Any) -> bool:
    """A const refusing a member of the value: an alternative told apart by a tag such as "type"."""
    return sub.validator == "const" and len(sub.relative_path) == 1


def _kinds_message(error: Any) -> Optional[str]:
    """'5 is not of type "object" nor one of ["none", "auto"]' for an anyOf / oneOf whose every alternative wants
    another JSON type (jsonschema says only "is not valid under any of the given schemas")."""
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return None
    if not all(_of_other_kind(group) for group in _alternatives(error).values()):
        return None
    kinds: list = []
    values: list = []
    for sub in filter(_refuses_kind, error.context):
        value = sub.validator_value
        if sub.validator == "type":
            kinds += [kind for kind in ([value] if isinstance(value, str) else value) if kind not in kinds]
        else:
            values += [member for member in (value if sub.validator == "enum" else [value]) if member not in values]
    parts = ([f"of type {', '.join(json_repr(kind) for kind in kinds)}"] if kinds else []) + (
        [f"one of {json_repr(values)}"] if values else [])
    return f"{short_repr(error.instance)} is not {' nor '.join(parts)}"


_SCHEMA_COMPILE = re.compile(r"^at \d+\(\d+\): failed to compile JSON schema: (.*?)\n\s*\d+ \| .*$", re.DOTALL)
_ONE_OF = "oneOf constraints are not supported."


def schema_compile_reason(error: str) -> str:
    """llguidance's reason for refusing a %json schema, without its place in the grammar copy and the excerpt of that
    copy it quotes (`1 | start: %json{... "x-guidance": ...}` and a caret: the bounded copy, with keys the client never
    sent, and an option of llguidance's it cannot set, "Enable 'coerce_one_of'"). Other grammar errors (a client's own
    Lark or GBNF grammar) keep their place and excerpt."""
    match = _SCHEMA_COMPILE.match(error)
    if match is None:
        return error
    reason = match.group(1).strip()
    if reason.startswith(_ONE_OF):
        return ("oneOf whose branches one value could match together is not supported (it cannot be enforced that "
                "exactly one matches); anyOf is")
    return reason
