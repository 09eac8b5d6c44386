"""Scheduler process: the pool of GDN state slots (recurrent + conv state), one per running request."""


class StatePoolError(Exception):
    """A slot was freed twice or was never handed out: a scheduler bug, not bad input."""


class StatePool:
    """Hands out GDN state slot ids; a request holds one slot from its first step until it finishes."""

    def __init__(self, num_slots: int):
        if num_slots < 0:
            raise ValueError(f"bad state pool size {num_slots}")
        self.num_total_slots = num_slots
        # Lowest ids first, so a small batch touches a compact range of slots.
        self.free_slot_ids = list(range(num_slots - 1, -1, -1))
        self._used = set()

    @property
    def num_free_slots(self) -> int:
        """GDN state slots no request holds."""
        return len(self.free_slot_ids)

    def allocate(self) -> int:
        """Returns a free slot id; raises StatePoolError when none is free (check num_free_slots first)."""
        if not self.free_slot_ids:
            raise StatePoolError("no free GDN state slot")
        slot = self.free_slot_ids.pop()
        self._used.add(slot)
        return slot

    def free(self, slot: int) -> None:
        """Returns `slot` to the pool; StatePoolError when it is not in use (a double free)."""
        if slot not in self._used:
            raise StatePoolError(f"slot {slot} freed but not in use")
        self._used.discard(slot)
        self.free_slot_ids.append(slot)
