"""Scheduler process: the steps sent to the worker whose results are not applied yet (at most two with asynchronous
scheduling, scheduler/lookahead.py), oldest first, each with the future its pb.StepResult resolves."""
import asyncio
import collections
import time
from dataclasses import dataclass


@dataclass
class Flight:
    step: object            # pb.PackedStep sent to the worker
    future: asyncio.Future  # its pb.StepResult
    plan_ns: int            # time spent planning it
    sent_ns: int            # perf_counter_ns when sent


class InFlight:
    """Steps in flight in the order they were sent (the worker answers in that order)."""

    def __init__(self):
        self.flights = collections.deque()

    def __len__(self) -> int:
        return len(self.flights)

    def __iter__(self):
        return iter(self.flights)

    @property
    def oldest(self) -> Flight:
        """The step sent first and not yet popped (IndexError when none)."""
        return self.flights[0]

    def add(self, step, plan_ns: int) -> Flight:
        """Records `step` (pb.PackedStep) as sent now with its planning time (ns); returns its Flight, whose future the
        matching pb.StepResult resolves."""
        future = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # fail_all fails unawaited ones too
        flight = Flight(step, future, plan_ns, time.perf_counter_ns())
        self.flights.append(flight)
        return flight

    def pop_oldest(self) -> Flight:
        """Removes and returns the oldest Flight (IndexError when none)."""
        return self.flights.popleft()

    def resolve(self, result) -> None:
        """Hands `result` to the step it answers (no-op for a step not in flight, e.g. from before a worker loss)."""
        for flight in self.flights:
            if flight.step.step_id == result.step_id and not flight.future.done():
                flight.future.set_result(result)

    def fail_all(self, exc: Exception) -> None:
        """Fails every unresolved future with `exc` (the worker was lost) and forgets every flight."""
        for flight in self.flights:
            if not flight.future.done():
                flight.future.set_exception(exc)
        self.flights.clear()
