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
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# ASCII digits only, as Go reads them (Python's \d and float() also take "١٠").
_PART = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)")
# The Go type encoding/json decodes a JSON value to (into `any`), which Ollama names when keep_alive is neither.
_GO_TYPES = {bool: "bool", list: "[]interface {}", dict: "map[string]interface {}"}
# Go's longest time.Duration (2^63 - 1 ns, about 292 years): ParseDuration refuses a longer string, and Ollama keeps
# a model loaded that long "forever" (a negative keep_alive); a longer number of seconds is kept forever here too.
MAX_DURATION_S = (2**63 - 1) / 1e9


def _go_duration(text: str) -> Optional[float]:
    """Seconds of a Go duration string ("5m", "1h30m", "-1s", "0"); None when Go's time.ParseDuration fails."""
    sign, rest = 1.0, text
    if rest[:1] in "+-" and rest:
        sign, rest = (-1.0 if rest[0] == "-" else 1.0), rest[1:]
    if rest == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(rest):
        match = _PART.match(rest, pos)
        if match is None:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not rest or total > MAX_DURATION_S:
        return None
    return sign * total


def parse_keep_alive(value: Any) -> Optional[float]:
    """keep_alive in seconds (inf for a negative value); None when absent; 400 "invalid duration" otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        # Ollama's words (api/types.go Duration.UnmarshalJSON: the Go type the JSON value decodes to).
        raise InvalidRequest(f"Unsupported type: '{_GO_TYPES.get(type(value), 'bool')}'", param="keep_alive")
    if isinstance(value, str):
        # Ollama's clients also send bare numbers as strings ("-1", "3600"): seconds, like a JSON number.
        seconds = float(value) if _NUMBER.fullmatch(value) else _go_duration(value)
        if seconds is None:
            raise InvalidRequest(f'time: invalid duration "{value}"', param="keep_alive")
    else:
        seconds = float(value)
    return FOREVER if seconds < 0 or seconds >= MAX_DURATION_S else seconds


class LoadState:
    """What /api/ps shows: when the model was last used and how long it is kept after that."""

    def __init__(self) -> None:
        self.last_use = time.time()
        self.keep_alive = DEFAULT_KEEP_ALIVE_S
        self.unloaded = False

    def touch(self, keep_alive: Optional[float]) -> None:
        """A request used the model; keep_alive 0 unloads it (after that request, for Ollama)."""
        self.last_use = time.time()
        self.keep_alive = DEFAULT_KEEP_ALIVE_S if keep_alive is None else keep_alive
        self.unloaded = self.keep_alive == 0

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
