"""Worker: the GDN recurrent state dtype is a worker setting (SPARKINFER_GDN_STATE_DTYPE) that reaches the pool."""
import os

import pytest
import torch

from proto import pb
from scheduler.request import Request
from scheduler.scheduler import Scheduler, SchedulerLimits
from worker.server import WorkerConfig, build_runner, parse_config

TINY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models", "tiny")


def _greedy(runner, prompt, num_tokens):
    """Runs one greedy request to num_tokens through the real scheduler and runner; returns its tokens."""
    sched = Scheduler(SchedulerLimits(max_num_batched_tokens=16, max_num_seqs=4), 32, 16, 4, 4096)
    sched.session_id = "s"
    sched.add_request(Request("r", prompt, pb.SamplingParams(temperature=0), num_tokens))
    tokens = []
    while (step := sched.schedule()) is not None:
        step.session_id = "s"
        result = runner.execute(step)
        assert not result.error, result.error
        tokens.extend(result.token_ids)
        sched.update(result)
    return tokens


def test_env_selects_the_state_dtype():
    assert parse_config([], {"SPARKINFER_GDN_STATE_DTYPE": "bfloat16"}).state_dtype == "bfloat16"
    assert parse_config([], {}).state_dtype == "float32"


def test_unknown_state_dtype_is_refused_by_name():
    with pytest.raises(ValueError, match="'float8' is not one of"):
        build_runner(WorkerConfig(model=TINY, device="cpu", num_kv_blocks=8, num_state_slots=2, state_dtype="float8"))


@pytest.mark.skipif(not os.path.isfile(os.path.join(TINY, "config.json")), reason="run `make model`")
def test_bf16_state_pool_serves_and_stays_close_to_f32():
    prompt = list(range(3, 40))  # 37 tokens: three prefill chunks of 16, then decode
    runs = {}
    for name in ("float32", "bfloat16"):
        runner, _ = build_runner(WorkerConfig(model=TINY, device="cpu", num_kv_blocks=32, num_state_slots=4,
                                              state_dtype=name))
        assert runner.cache.recurrent_state.dtype == getattr(torch, name)
        runs[name] = _greedy(runner, prompt, 12)
    assert len(runs["bfloat16"]) == len(runs["float32"]) == 12
    # Rounding the state to bf16 may flip a near tie late, but the first greedy tokens agree.
    assert runs["bfloat16"][:4] == runs["float32"][:4]
