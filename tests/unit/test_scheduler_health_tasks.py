"""Unit tests: the scheduler's health updates (grpc health's set, one task per service name) are held until they end.
The event loop keeps only weak references to tasks (Python docs, asyncio.create_task: "Save a reference to the result
of this function, to avoid a task disappearing mid-execution", https://docs.python.org/3/library/asyncio-task.html);
on main the two tasks were started and dropped."""
import asyncio

from scheduler import server


class SlowHealth:
    def __init__(self):
        self.release, self.statuses = asyncio.Event(), []

    async def set(self, name, status):
        await self.release.wait()
        self.statuses.append((name, status))


async def test_health_updates_are_held_until_they_end():
    health = SlowHealth()
    server._health_callback(health)(True)
    held = [task for task in server.HEALTH_TASKS if not task.done()]
    assert len(held) == 2
    health.release.set()
    await asyncio.gather(*held)
    assert len(health.statuses) == 2 and not (set(held) & server.HEALTH_TASKS)
