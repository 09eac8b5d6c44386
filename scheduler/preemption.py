"""Scheduler process: preemption by recompute, the Scheduler's side that takes KV blocks from later requests when a
running one must grow (vLLM's policy: the least urgent, the newest of those). Pure Python, no sockets, no torch."""
from scheduler.request import WAITING, Request


class Preemption:
    """Uses the Scheduler's block manager, prefix cache, running and waiting requests, counters and _release."""

    def _reserve_blocks(self, req: Request, num_new: int, scheduled: set) -> bool:
        """Grows req's block table for num_new more tokens, preempting later requests; False if req itself went."""
        num_needed = req.num_computed_tokens + num_new
        while not self.block_manager.grow(req.block_ids, num_needed):
            if self.prefix_cache.evict_one():
                continue
            victim = self._victim(req, scheduled)
            self._preempt(victim or req)
            if victim is None:
                return False
        return True

    def _victim(self, req: Request, scheduled: set) -> "Request | None":
        """The running request to preempt so that `req` can grow, vLLM's: the least urgent (the highest priority
        value), the newest of those, among those without a row in this step; None when `req` itself is the one (no
        other can go, or all others are more urgent)."""
        others = (r for r in reversed(self.running) if r.req_id not in scheduled and r is not req)
        victim = max(others, key=lambda r: r.priority, default=None)
        return victim if victim is not None and victim.priority >= req.priority else None

    def _preempt(self, req: Request) -> None:
        self.running.remove(req)
        self._release(req)
        req.status = WAITING
        req.num_preemptions += 1
        self.waiting.push_front(req)
        self.num_preemptions += 1
