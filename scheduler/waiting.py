"""Scheduler process: the queue of waiting requests in vLLM's priority order (a lower `priority` first, then the
order they came in; vLLM's --scheduling-policy priority). With every priority 0, the default, it is first come first
served, and a preempted request resumes first."""
from collections import deque


class WaitingQueue(deque):
    """A deque of Requests kept in priority order (the scheduler reads [0], pops left, removes, iterates)."""

    def add(self, req) -> None:
        """Queues a new request behind every waiting one of its priority or a more urgent one."""
        if not self or self[-1].priority <= req.priority:
            self.append(req)
            return
        self.insert(next(i for i, r in enumerate(self) if r.priority > req.priority), req)

    def push_front(self, req) -> None:
        """Queues a preempted request ahead of every waiting one of its priority (it resumes first, as vLLM prepends
        it), behind the more urgent ones."""
        if not self or self[0].priority >= req.priority:
            self.appendleft(req)
            return
        self.insert(next((i for i, r in enumerate(self) if r.priority >= req.priority), len(self)), req)
