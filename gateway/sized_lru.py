"""Gateway process: a map bounded by its number of entries and by the bytes they hold, least recently used out. The
recent responses' items (gateway.responses_items.ItemStore) and the event logs of ended background responses
(gateway.responses_replay.EndedLogs) are kept in one."""
from collections import OrderedDict
from typing import Any, Hashable, Optional


class SizedLru:
    """key -> value with its size in bytes. Past max_items entries (None: no count bound) or max_bytes in all, the
    least recently used go first; a value larger than max_bytes alone is not kept."""

    def __init__(self, max_bytes: int, max_items: Optional[int] = None):
        self.max_bytes, self.max_items, self.num_bytes = max_bytes, max_items, 0
        self._entries: OrderedDict = OrderedDict()  # key -> (value, size)

    def put(self, key: Hashable, value: Any, size: int) -> None:
        """Keeps value under key (replacing what was there) as the most recently used, then evicts to the bounds."""
        self.drop(key)
        if size > self.max_bytes:
            return
        self._entries[key] = (value, size)
        self.num_bytes += size
        while self._entries and (self.num_bytes > self.max_bytes
                                 or (self.max_items is not None and len(self._entries) > self.max_items)):
            self.num_bytes -= self._entries.popitem(last=False)[1][1]

    def get(self, key: Hashable) -> Any:
        """The value kept under key, now the most recently used; None when it is not held."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def drop(self, key: Hashable) -> None:
        """Forgets key, if held."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.num_bytes -= entry[1]
