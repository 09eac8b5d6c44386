"""Gateway process: warnings about ignored request names (unknown fields, tool types), each name logged once."""
from __future__ import annotations

import logging
from typing import Iterable

log = logging.getLogger("sparkinfer.gateway")
# Names remembered in all (the names are the clients', so without a bound the set grew with every new one), and
# names shown in one request's line (one body with 100000 unknown keys wrote 100000 lines).
MAX_REMEMBERED = 1024
MAX_SHOWN = 16


class OnceLog:
    """One warning a request for the names it brings that none before did, as vLLM logs a request's ignored fields in
    one line (OpenAIBaseModel's "The following fields were present in the request but ignored")."""

    def __init__(self, template: str):
        self.template = template  # "%s" is the names
        self.seen: set = set()

    def note(self, names: Iterable[str]) -> None:
        """Logs one warning naming the names not seen before (at most MAX_SHOWN named, MAX_REMEMBERED kept)."""
        room = MAX_REMEMBERED - len(self.seen)
        new = [name for name in dict.fromkeys(names) if name not in self.seen][:max(room, 0)]
        if not new:
            return
        self.seen.update(new)
        shown = ", ".join(repr(name) for name in new[:MAX_SHOWN])
        more = f" and {len(new) - MAX_SHOWN} more" if len(new) > MAX_SHOWN else ""
        full = "; no further names are logged" if len(self.seen) >= MAX_REMEMBERED else ""
        log.warning(self.template + " (each name logged once%s)", shown + more, full)
