"""Gateway process: Ollama keep_alive (parsed as Ollama does) and the load bookkeeping /api/ps reports.

The model never leaves the GPU here; /api/ps reports what Ollama would: expires_at = last use + keep_alive
(default 5m, negative = forever; before the first request, from the gateway's start), and no model once that time
has passed with no request since, or after a request with keep_alive 0 (an explicit unload, or a generation Ollama
would unload right after), until the next request "loads" it again. A generation on any API uses the model (Ollama's
/v1 keeps a model loaded as /api does). The state is per gateway process.
"""
from __future__ import annotations

import re
import time
from typing import Any, Optional

from gateway.errors import InvalidRequest

DEFAULT_KEEP_ALIVE_S = 300.0
FOREVER = float("inf")
# Go's time.ParseDuration units in nanoseconds, matched as the bytes of the string (µ U+00B5 and μ U+03BC).
_UNITS = {b"ns": 1, b"us": 10**3, "µs".encode(): 10**3, "μs".encode(): 10**3, b"ms": 10**6, b"s": 10**9,
          b"m": 60 * 10**9, b"h": 3600 * 10**9}
_DIGITS = re.compile(rb"[0-9]*")
_UNIT = re.compile(rb"[^0-9.]*")
# The Go type encoding/json decodes a JSON value to (into `any`), which Ollama names when keep_alive is neither.
_GO_TYPES = {bool: "bool", list: "[]interface {}", dict: "map[string]interface {}"}
# Go's longest time.Duration (2^63 - 1 ns, about 292 years): ParseDuration refuses a longer string, and Ollama keeps
# a model loaded that long "forever" (a negative keep_alive); a longer number of seconds is kept forever here too.
MAX_DURATION_S = (2**63 - 1) / 1e9


def _go_quote(text: bytes) -> str:
    """Go's time.quote: in double quotes, '"' and '\\' escaped, each byte of a non-ASCII or control character \\xNN."""
    return '"' + "".join(f"\\x{b:02x}" if b < 0x20 or b >= 0x80 else "\\" + chr(b) if b in b'"\\' else chr(b)
                         for b in text) + '"'


def _go_duration(text: str) -> float:
    """Seconds of a Go duration string ("5m", "1h30m", "-1s", "0"), or Ollama's 400 in the words of Go's
    time.ParseDuration: 'time: invalid duration "x"', 'time: missing unit in duration "1h5"', 'time: unknown unit
    "d" in duration "5d"' (its algorithm, on the string's bytes: a part's number, its unit, the 2^63 ns limit)."""
    orig = rest = text.encode()
    invalid = InvalidRequest(f"time: invalid duration {_go_quote(orig)}", param="keep_alive")
    sign = -1.0 if rest[:1] == b"-" else 1.0
    rest = rest[1:] if rest[:1] in (b"-", b"+") else rest
    if rest == b"0":
        return 0.0
    if not rest:
        raise invalid
    total, pos = 0, 0
    while pos < len(rest):
        if rest[pos] not in b".0123456789":
            raise invalid
        whole = _DIGITS.match(rest, pos).group()
        pos += len(whole)
        if whole and int(whole) > 2**63:
            raise invalid   # Go's leadingInt overflows before the unit is read
        fraction = _DIGITS.match(rest, pos + 1).group() if rest[pos:pos + 1] == b"." else b""
        pos += len(fraction) + (rest[pos:pos + 1] == b".")
        if not whole and not fraction:
            raise invalid
        unit = _UNIT.match(rest, pos).group()
        pos += len(unit)
        if not unit:
            raise InvalidRequest(f"time: missing unit in duration {_go_quote(orig)}", param="keep_alive")
        if unit not in _UNITS:
            raise InvalidRequest(f"time: unknown unit {_go_quote(unit)} in duration {_go_quote(orig)}",
                                 param="keep_alive")
        part = int(whole or b"0") * _UNITS[unit] + int(float(b"0." + fraction) * _UNITS[unit] if fraction else 0)
        total += part
        if part > 2**63 or total > 2**63:
            raise invalid
    if sign > 0 and total > 2**63 - 1:
        raise invalid
    return sign * total / 1e9


def parse_keep_alive(value: Any) -> Optional[float]:
    """keep_alive in seconds (inf for a negative value); None when absent. A JSON number is seconds; a string is a Go
    duration and nothing else, as Ollama's Duration.UnmarshalJSON reads it with time.ParseDuration: a number written
    as a string ("-1", "3600") is its 400 'time: missing unit in duration "-1"' (karakeep-app/karakeep#2409,
    skalesapp/skales#281), only "0" needs no unit."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        # Ollama's words (api/types.go Duration.UnmarshalJSON: the Go type the JSON value decodes to).
        raise InvalidRequest(f"Unsupported type: '{_GO_TYPES.get(type(value), 'bool')}'", param="keep_alive")
    seconds = _go_duration(value) if isinstance(value, str) else float(value)
    return FOREVER if seconds < 0 or seconds >= MAX_DURATION_S else seconds


class LoadState:
    """What /api/ps shows: when the model was last used, how long it is kept after that and the window it was last
    "loaded" with."""

    def __init__(self) -> None:
        self.last_use = time.time()
        self.keep_alive = DEFAULT_KEEP_ALIVE_S
        self.unloaded = False
        self.context_length: Optional[int] = None

    def touch(self, keep_alive: Optional[float], context_length: Optional[int] = None) -> None:
        """A request used the model; keep_alive 0 unloads it (after that request, for Ollama). context_length is the
        window it asked for (Ollama's options.num_ctx, clamped), None for the default one: Ollama reloads a runner
        whose num_ctx differs from the request's (server/sched.go needsReload), so /api/ps's context_length is the
        last request's window (ollama/ollama#11331: `ollama ps` shows 8192 after `/set parameter num_ctx 8192`)."""
        self.last_use = time.time()
        self.keep_alive = DEFAULT_KEEP_ALIVE_S if keep_alive is None else keep_alive
        self.unloaded = self.keep_alive == 0
        self.context_length = context_length

    def release(self) -> None:
        """A generation finished: Ollama's keep_alive counts from when the model goes idle."""
        self.last_use = time.time()

    def expires_at(self, busy: bool = False) -> Optional[float]:
        """Unix time the model expires (inf: never); None when it counts as unloaded: unloaded by keep_alive 0, or
        expired (Ollama's scheduler unloads an idle model when its keep_alive runs out; /api/ps then lists none).
        While a generation runs (busy) the model is listed whatever its keep_alive: Ollama's scheduler unloads a
        runner only once its last request is done (server/sched.go: expireRunner and a finished request expire it at
        refCount 0), so a keep_alive 0 request, or an unload sent meanwhile, leaves it listed until then."""
        expires = self.last_use + self.keep_alive
        if busy:
            return expires
        return None if self.unloaded or expires <= time.time() else expires
