"""Worker process: the compute loop, pipelined so the device never waits for the scheduler's round trip.

Per step n: launch n (its forward queued on the device behind step n - 1's sampling), finish n - 1 (wait for its
tokens, send its StepResult), then queue n's sampling; the ids stay on the device for step n + 1's previous_token
rows (scheduler/lookahead.py). While step n runs the loop waits for step n + 1 and launches it the moment it
arrives; once the device has finished n, n's result goes out first (polled every POLL_S). Results leave in step
order. On a CPU the forward and sampling run inside launch / sample, so the loop degenerates to one step at a time.
"""
import queue

POLL_S = 0.0002
_READY = object()  # the step in flight finished on the device before another step arrived


class StepPipeline:
    """Runs the steps from `steps` (a queue.Queue of pb.PackedStep; None stops) on `runner` (ModelRunner) and hands
    each pb.StepResult to `send`, in order."""

    def __init__(self, runner, steps: "queue.Queue", send):
        self.runner, self.steps, self.send = runner, steps, send

    def run(self) -> None:
        """Runs steps until the link hands None (shutdown): each step is launched before the previous one's result is
        finished and sent, so the GPU runs while the host sends."""
        pending = None  # the launched and sampled step whose result is not sent yet
        while True:
            step = self._next(pending)
            if step is _READY:
                self.send(self.runner.finish(pending))
                pending = None
                continue
            if step is None:
                if pending is not None:
                    self.send(self.runner.finish(pending))
                return
            launched = self.runner.launch(step)
            if pending is not None:
                self.send(self.runner.finish(pending))
            pending = self.runner.sample(launched)

    def _next(self, pending):
        """The next step, None when told to stop, or _READY once `pending` is done on the device (its result goes
        out before anything else; on a CPU at once)."""
        if pending is None:
            return self.steps.get()
        while not pending.done():
            try:
                return self.steps.get(timeout=POLL_S)
            except queue.Empty:
                continue
        return _READY
