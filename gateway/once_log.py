"""Gateway process: warnings about ignored request names (unknown fields, tool types), each name logged once."""
from __future__ import annotations

import logging
import reprlib
from typing import Any, Iterable

log = logging.getLogger("sparkinfer.gateway")
# Names remembered in all (the names are the clients', so without a bound the set grew with every new one), and
# names shown in one request's line (one body with 100000 unknown keys wrote 100000 lines).
MAX_REMEMBERED = 1024
MAX_SHOWN = 16
# Characters of one name a warning writes and the set keeps. The names are the clients' and may be as long as a body:
# 20 requests, each with one unknown field named by 5 MB, grew the gateway by 95 MB (the set kept each name whole, up
# to MAX_REMEMBERED of them: 32 GiB at the 32 MiB body limit) and wrote 100 MB of log.
MAX_NAME_CHARS = 80
_short = reprlib.Repr()
_short.maxstring = _short.maxother = MAX_NAME_CHARS


def short_name(name: Any) -> str:
    """repr(name) for a log line, a long one cut in the middle as reprlib cuts it ('AAAA...AAAA', MAX_NAME_CHARS)."""
    return _short.repr(name)


class OnceLog:
    """One warning a request for the names it brings that none before did, as vLLM logs a request's ignored fields in
    one line (OpenAIBaseModel's "The following fields were present in the request but ignored")."""

    def __init__(self, template: str):
        self.template = template  # "%s" is the names
        self.seen: set = set()

    def note(self, names: Iterable[str]) -> None:
        """Logs one warning naming the names not seen before (at most MAX_SHOWN named, MAX_REMEMBERED kept, each as
        short_name writes it)."""
        room = MAX_REMEMBERED - len(self.seen)
        new = [name for name in dict.fromkeys(map(short_name, names)) if name not in self.seen][:max(room, 0)]
        if not new:
            return
        self.seen.update(new)
        shown = ", ".join(new[:MAX_SHOWN])
        more = f" and {len(new) - MAX_SHOWN} more" if len(new) > MAX_SHOWN else ""
        full = "; no further names are logged" if len(self.seen) >= MAX_REMEMBERED else ""
        log.warning(self.template + " (each name logged once%s)", shown + more, full)
