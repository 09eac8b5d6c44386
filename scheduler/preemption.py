"""Scheduler process: preemption by recompute, the Scheduler's side that takes KV blocks from later requests when a
running one must grow (vLLM's policy: the least urgent, the newest of those). Pure Python, no sockets, no torch.
Functions of a Scheduler `sched` (its block manager, prefix cache, running and waiting requests, counters, _release)."""
from scheduler.request import WAITING, Request


def reserve_blocks(sched, req: Request, num_new: int, scheduled: set) -> bool:
    """Grows req's block table for num_new more tokens, preempting later requests; False if req itself went."""
    num_needed = req.num_computed_tokens + num_new
    while not sched.block_manager.grow(req.block_ids, num_needed):
        if sched.prefix_cache.evict_one():
            continue
        other = victim(sched, req, scheduled)
        preempt(sched, other or req)
        if other is None:
            return False
    return True


def victim(sched, req: Request, scheduled: set) -> "Request | None":
    """The running request to preempt so that `req` can grow, vLLM's: the least urgent (the highest priority value),
    the newest of those, among those without a row in this step; None when `req` itself is the one (no other can
    go, or all others are more urgent)."""
    others = (r for r in reversed(sched.running) if r.req_id not in scheduled and r is not req)
    found = max(others, key=lambda r: r.priority, default=None)
    return found if found is not None and found.priority >= req.priority else None


def preempt(sched, req: Request) -> None:
    """Puts running `req` back at the head of the waiting queue, its blocks and state slot released (recomputed
    when it is seated again)."""
    sched.running.remove(req)
    sched._release(req)
    req.status = WAITING
    req.num_preemptions += 1
    sched.waiting.push_front(req)
    sched.num_preemptions += 1
