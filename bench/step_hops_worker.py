"""Bench helper (the worker process of bench/step_hops.py): `python -m worker.server` with timestamps.

Records perf_counter_ns (CLOCK_MONOTONIC on Linux: one clock for every process of the host) per step when the I/O
thread receives it, when the compute loop launches and finishes it, when the result is handed to the I/O thread and
when the I/O thread sends it; every 20 steps the whole record is written as JSON to $STEP_HOPS_OUT.
"""
import json
import os
import time

import worker.model_runner as model_runner
import worker.wire as wire
from worker import server

OUT = os.environ.get("STEP_HOPS_OUT", "")
EVENTS = {}
RESULT_FRAMES = {}


def _mark(step_id: int, key: str) -> None:
    EVENTS.setdefault(step_id, {})[key] = time.perf_counter_ns()
    if key == "finish" and len(EVENTS) % 20 == 0 and OUT:
        with open(OUT, "w", encoding="utf-8") as f:
            json.dump(EVENTS, f)


def _wrap(cls, name: str, before=None, after=None) -> None:
    original = getattr(cls, name)

    def wrapped(self, arg):
        if before:
            before(arg)
        out = original(self, arg)
        if after:
            after(arg, out)
        return out
    setattr(cls, name, wrapped)


def _send_result(self, result) -> None:
    frame = wire.pb.WorkerMessage(result=result).SerializeToString()
    RESULT_FRAMES[frame] = result.step_id
    _mark(result.step_id, "handed_over")
    self._results.send(frame)


def main() -> None:
    _wrap(wire.SchedulerLink, "handle_step", before=lambda step: _mark(step.step_id, "io_in"))
    _wrap(model_runner.ModelRunner, "launch", before=lambda step: _mark(step.step_id, "launch"))
    _wrap(model_runner.ModelRunner, "finish", after=lambda launched, result: _mark(result.step_id, "finish"))
    wire.SchedulerLink.send_result = _send_result
    _wrap(wire.SchedulerLink, "_send_raw",
          before=lambda frame: frame in RESULT_FRAMES and _mark(RESULT_FRAMES.pop(frame), "io_out"))
    server.main()


if __name__ == "__main__":
    main()
