"""Asynchronous scheduling end to end on the tiny model (CPU): Scheduler + scheduler/lookahead.py planning ahead,
the worker's StepPipeline (worker/pipeline.py) running the steps on a ModelRunner in its own thread. Token ids and
logprobs must equal the synchronous run's bit for bit (greedy and seeded sampling with top logprobs)."""
import os
import queue
import threading

import pytest
import torch

from proto import pb
from scheduler import lookahead
from scheduler.request import Request
from scheduler.scheduler import Scheduler, SchedulerLimits
from tests.e2e.stack import DEFAULT_MODEL
from worker.cache import ModelCache
from worker.loader import load_model
from worker.model_runner import ModelRunner
from worker.pipeline import StepPipeline

GREEDY = pb.SamplingParams()
SEEDED = pb.SamplingParams(temperature=1.0, top_p=0.9, top_k=50, has_seed=True, seed=99, num_logprobs=3)
PENALTY = pb.SamplingParams(temperature=0.8, has_seed=True, seed=5, repetition_penalty=1.3, presence_penalty=0.5)


@pytest.fixture(scope="module")
def tiny():
    if not os.path.isfile(os.path.join(DEFAULT_MODEL, "config.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    return load_model(DEFAULT_MODEL, progress=False)


def _setup(tiny, device="cpu", dtype=torch.float32):
    model, config = tiny
    cache = ModelCache(config, 64, 16, 4, device=device, dtype=dtype)
    sched = Scheduler(SchedulerLimits(64, 4), 64, 16, 4, 4096)
    sched.session_id = "s"
    for i, sampling in enumerate((GREEDY, SEEDED, PENALTY)):
        sched.add_request(Request(f"r{i}", [5 + 7 * i + j for j in range(20 + 30 * i)], sampling, 9 + 4 * i))
    return sched, ModelRunner(model, config, cache, config.vocab_size)


def _apply(sched, result, out):
    assert not result.error, result.error
    for o in sched.update(result):
        out.setdefault(o.req_id, []).extend(zip(o.token_ids, o.logprobs,
                                                 [(tuple(t.token_ids), tuple(t.logprobs)) for t in o.top_logprobs]
                                                 or [None] * len(o.token_ids)))


def serve_sync(tiny, **device):
    sched, runner = _setup(tiny, **device)
    out = {}
    while (step := sched.schedule()) is not None:
        _apply(sched, runner.execute(step), out)
    return out


def serve_pipelined(tiny, **device):
    """The engine's loop without asyncio: at most two steps in flight, the second a lookahead of the first."""
    sched, runner = _setup(tiny, **device)
    steps, results, out, inflight, num_ahead = queue.Queue(), queue.Queue(), {}, [], 0
    thread = threading.Thread(target=StepPipeline(runner, steps, results.put).run)
    thread.start()
    try:
        while True:
            if not inflight:
                step = sched.schedule()
                if step is None:
                    break
                steps.put(step)
                inflight.append(step)
            if len(inflight) == 1 and (ahead := lookahead.plan(sched, inflight[0])) is not None:
                steps.put(ahead)
                inflight.append(ahead)
                num_ahead += 1
            result = results.get(timeout=60)
            assert result.step_id == inflight.pop(0).step_id  # results come back in step order
            _apply(sched, result, out)
    finally:
        steps.put(None)
        thread.join(timeout=60)
    return out, num_ahead


def test_pipelined_lookahead_steps_give_the_synchronous_tokens_and_logprobs(tiny):
    want = serve_sync(tiny)
    got, num_ahead = serve_pipelined(tiny)
    assert got == want
    assert num_ahead >= 10 and {len(v) for v in got.values()} == {9, 13, 17}


def test_previous_token_row_without_a_previous_sample_fails_the_step(tiny):
    sched, runner = _setup(tiny)
    step = pb.PackedStep(step_id=1, session_id="s")
    step.new_requests.add(req_id="x", sampling=GREEDY, prompt_token_ids=[5, 6, 7])
    step.rows.add(req_id="x", num_tokens=1, context_len=3, state_slot=0, block_table=[0], sample=True,
                  previous_token=True)
    step.token_ids.append(-1)
    result = runner.execute(step)
    assert "takes the previous step's token" in result.error and not result.token_ids


class _Fake:
    """Records the pipeline's calls; launched steps report done() only once `done` is set."""

    def __init__(self):
        self.calls, self.done = [], threading.Event()

    def launch(self, step):
        self.calls.append(("launch", step.step_id))
        fake = self

        class Launched:
            step_id = step.step_id

            def done(self):
                return fake.done.is_set()
        return Launched()

    def sample(self, launched):
        self.calls.append(("sample", launched.step_id))
        return launched

    def finish(self, launched):
        self.calls.append(("finish", launched.step_id))
        return launched.step_id


def test_pipeline_launches_the_next_step_before_waiting_for_this_one():
    fake, steps, sent = _Fake(), queue.Queue(), []
    for step_id in (1, 2, 3):
        steps.put(pb.PackedStep(step_id=step_id))
    steps.put(None)
    StepPipeline(fake, steps, sent.append).run()
    assert sent == [1, 2, 3]
    assert fake.calls == [("launch", 1), ("sample", 1), ("launch", 2), ("finish", 1), ("sample", 2),
                          ("launch", 3), ("finish", 2), ("sample", 3), ("finish", 3)]


def test_pipeline_sends_a_finished_step_before_taking_the_next():
    fake, steps, sent = _Fake(), queue.Queue(), []
    fake.done.set()  # a CPU step is done when launched: its result must not wait for the next step's forward
    for step_id in (1, 2):
        steps.put(pb.PackedStep(step_id=step_id))
    steps.put(None)
    StepPipeline(fake, steps, sent.append).run()
    assert sent == [1, 2]
    assert fake.calls == [("launch", 1), ("sample", 1), ("finish", 1), ("launch", 2), ("sample", 2), ("finish", 2)]
