"""Gateway process: the functions a per-request Ollama template (Go text/template) may call: Go's builtins not, and,
or, eq, ne, lt, le, gt, ge, len, slice, index, print, printf, println and Ollama's currentDate, yesterdayDate, json,
toTypeScriptType (template/template.go funcs); and how a value prints."""
from __future__ import annotations

import datetime
import json
import re
from typing import Any, Optional

from gateway.ollama_template_parse import fail

# Go's predefined constants, and its functions and actions not read here (any other name is Go's "not defined").
CONSTANTS = {"true": True, "false": False, "nil": None}
UNREAD_BUILTINS = frozenset("call html js urlquery template define block".split())
# A printf verb: flags, width, precision and the verb letter (fmt's syntax).
_VERB = re.compile(r"%([-+# 0]*)(\d+)?(?:\.(\d+))?([a-zA-Z%])")
# fmt's tooLarge: the largest number it reads on into a width or precision.
_MAX_WIDTH = 1_000_000
_GO_TYPES = {bool: "bool", int: "int", float: "float64", str: "string", list: "[]interface {}",
             dict: "map[string]interface {}"}


def truth(value: Any) -> bool:
    """Go template truthiness (if, and, or, not): nil, false, 0, "" and empty lists and maps are false."""
    return bool(value) if value is not None else False


def text(value: Any) -> str:
    """A value as {{ }} prints it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _go_json(value: Any) -> str:
    """Go's json.Marshal: compact, a message's fields by their json names, <, >, & escaped as Go does for HTML."""
    value = [_json_names(item) for item in value] if isinstance(value, list) else _json_names(value)
    out = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return re.sub("[<>&\u2028\u2029]", lambda match: f"\\u{ord(match.group()):04x}", out)


def _json_names(value: Any) -> Any:
    return {key[:1].lower() + key[1:]: item for key, item in value.items()} if isinstance(value, dict) else value


def _compare(name: str, a: Any, b: Any) -> int:
    """Go's lt / le / gt / ge operands: integers, floats or strings, both of one kind (an int against a float, or any
    other type, is Go's error)."""
    kinds = {type(a), type(b)}
    if len(kinds) != 1 or not kinds <= {int, float, str}:
        raise fail(f"error calling {name}: incompatible types for comparison")
    return (a > b) - (a < b)


def _index(item: Any, *keys: Any) -> Any:
    """Go's index: item[k1][k2]...; a list takes an integer in range, a map any key (a missing one is nil)."""
    for key in keys:
        if isinstance(item, list) and isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(item):
                raise fail(f"error calling index: index out of range: {key}")
            item = item[key]
        elif isinstance(item, dict):
            item = item.get(key)
        else:
            raise fail(f"error calling index: cannot index {_GO_TYPES.get(type(item), 'nil')}")
    return item


def _sprint(*args: Any) -> str:
    """fmt.Sprint: a space between two operands when neither is a string."""
    out = ""
    for i, arg in enumerate(args):
        if i and not isinstance(arg, str) and not isinstance(args[i - 1], str):
            out += " "
        out += text(arg)
    return out


def _verb(flags: str, width: str, precision: str, verb: str, arg: Any) -> str:
    number = isinstance(arg, (int, float)) and not isinstance(arg, bool)
    if verb in "vs" or (verb == "t" and isinstance(arg, bool)):
        body = text(arg)
    elif verb == "q" and isinstance(arg, str):
        body = json.dumps(arg, ensure_ascii=False)
    elif verb == "d" and number and isinstance(arg, int):
        body = f"{arg:{'+' if '+' in flags else ''}d}"
    elif verb in "feg" and number:
        body = f"{arg:{'+' if '+' in flags else ''}.{precision or 6}{verb}}" if verb != "g" else f"{arg:g}"
    elif verb in "vsqdtfeg":
        return f"%!{verb}({_GO_TYPES.get(type(arg), '<nil>')}={text(arg)})"
    else:
        raise fail(f"error calling printf: the verb %{verb} is not supported")
    pad = "0" if "0" in flags and number and "-" not in flags else " "
    return body.ljust(int(width)) if "-" in flags and width else body.rjust(int(width or 0), pad)


def _too_large(digits: Optional[str]) -> bool:
    """fmt's parsenum gives up on a width or precision once the number read so far passes 1e6 (its tooLarge), so
    "%.99999999f" cannot make a string of 100 MB (it made one here: a 60-byte request, gigabytes of prompt)."""
    num = 0
    for digit in digits or "":
        if num > _MAX_WIDTH:
            return True
        num = num * 10 + int(digit)
    return False


def _sprintf(form: str, *args: Any) -> str:
    """fmt.Sprintf for the verbs a prompt template uses (%s %v %q %d %t %f %e %g, flags and width); a missing
    operand is fmt's %!s(MISSING), extra ones its %!(EXTRA ...), and a width or precision past 1e6 its %!(NOVERB),
    the rest of the format dropped (fmt's parsenum skips to the end)."""
    if not isinstance(form, str):
        raise fail("error calling printf: the format is not a string")
    pending = list(args)
    out, start = "", 0
    for match in _VERB.finditer(form):
        flags, width, precision, verb = match.groups()
        out += form[start:match.start()]
        start = match.end()
        if _too_large(width) or _too_large(precision):
            out += "%!(NOVERB)"
            start = len(form)
            break
        if verb == "%":
            out += "%"
        elif not pending:
            out += f"%!{verb}(MISSING)"
        else:
            out += _verb(flags, width, precision, verb, pending.pop(0))
    out += form[start:]
    if pending:
        out += "%!(EXTRA " + ", ".join(f"{_GO_TYPES.get(type(a), '<nil>')}={text(a)}" for a in pending) + ")"
    return out


FUNCTIONS = {
    "not": lambda a: not truth(a),
    "and": lambda *a: next((v for v in a if not truth(v)), a[-1]),
    "or": lambda *a: next((v for v in a if truth(v)), a[-1]),
    "eq": lambda a, *b: any(a == v for v in b),
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: _compare("lt", a, b) < 0,
    "le": lambda a, b: _compare("le", a, b) <= 0,
    "gt": lambda a, b: _compare("gt", a, b) > 0,
    "ge": lambda a, b: _compare("ge", a, b) >= 0,
    "len": lambda a: len(a or ()),
    "slice": lambda a, start=None, stop=None: (a or [])[start:stop],
    "index": _index,
    "print": _sprint,
    "printf": _sprintf,
    "println": lambda *a: " ".join(text(v) for v in a) + "\n",
    # Ollama's own (template/template.go funcs); a date format argument is ignored there too.
    "currentDate": lambda *_: datetime.date.today().isoformat(),
    "yesterdayDate": lambda *_: (datetime.date.today() - datetime.timedelta(days=1)).isoformat(),
    "json": lambda a: _go_json(a),
    # A tool property's TypeScript type there (gpt-oss's template calls it in its range over .Tools), "any" for any
    # other value; a per-request template on /api/generate is given no tools, so every value here is "any".
    "toTypeScriptType": lambda _value: "any",
}
