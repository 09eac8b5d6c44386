"""Unit tests: prefix-cache hits against cold runs on the tiny model (Scheduler + ModelRunner in-process, CPU).

A hit must give the same bits as a cold run: token ids and logprobs compared with ==, not approximately.
"""
import os

import pytest
import torch

from proto import pb
from scheduler.prefix_cache import PrefixCacheConfig
from scheduler.request import Request
from scheduler.scheduler import Scheduler, SchedulerLimits
from tests.e2e.stack import DEFAULT_MODEL
from worker.cache import ModelCache
from worker.loader import load_model
from worker.model_runner import ModelRunner

IM_START = 1016        # <|im_start|> in the tiny tokenizer
BLOCK, NUM_BLOCKS, NUM_SLOTS = 16, 96, 8
GREEDY = pb.SamplingParams()
SEEDED = pb.SamplingParams(temperature=1.0, top_p=0.9, has_seed=True, seed=1234, num_logprobs=3)


@pytest.fixture(scope="module")
def tiny():
    if not os.path.isfile(os.path.join(DEFAULT_MODEL, "config.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    return load_model(DEFAULT_MODEL, progress=False)


class Harness:
    """One scheduler and one worker runner over a fresh pool; serve() runs one request to its end."""

    def __init__(self, tiny, budget=2048, min_tokens=32, enabled=True, device="cpu", dtype=torch.float32,
                 state_dtype=torch.float32):
        model, config = tiny
        cache = ModelCache(config, NUM_BLOCKS, BLOCK, NUM_SLOTS, device=device, dtype=dtype, state_dtype=state_dtype)
        self.runner = ModelRunner(model, config, cache, config.vocab_size)
        prefix = PrefixCacheConfig(enabled, 4, min_tokens, IM_START)
        self.sched = Scheduler(SchedulerLimits(budget, 4), NUM_BLOCKS, BLOCK, NUM_SLOTS, 4096, prefix_cache=prefix)
        self.steps = []

    def serve(self, req_id: str, prompt: list, sampling=GREEDY, max_tokens=8) -> tuple:
        """Returns (token ids, logprobs, top logprobs as tuples, prompt tokens served from the cache)."""
        req = Request(req_id, list(prompt), sampling, max_tokens)
        self.sched.add_request(req)
        tokens, logprobs, tops = [], [], []
        while (step := self.sched.schedule()) is not None:
            self.steps.append(step)
            result = self.runner.execute(step)
            assert not result.error, result.error
            for out in self.sched.update(result):
                tokens += out.token_ids
                logprobs += out.logprobs
                tops += [(tuple(t.token_ids), tuple(t.logprobs)) for t in out.top_logprobs]
        self.sched.self_check()
        return tokens, logprobs, tops, req.num_cached_tokens


def text(seed: int, length: int) -> list:
    return [(seed * 131 + i * 37) % 1000 + 3 for i in range(length)]


def chat_prompt(system: list, turns: list) -> list:
    """ChatML-shaped ids: system, then (user, assistant reply) turns, the last reply None (the generation header)."""
    ids = [IM_START] + system
    for user, reply in turns:
        ids += [IM_START] + user + [IM_START] + [7, 8]
        if reply is not None:
            ids += reply + [1017]
    return ids


@pytest.mark.parametrize("sampling", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_warm_run_equals_cold_run(tiny, sampling):
    prompt = chat_prompt(text(1, 150), [(text(2, 30), None)])
    cold = Harness(tiny).serve("cold", prompt, sampling)
    warm_harness = Harness(tiny)
    first = warm_harness.serve("first", prompt, sampling)
    again = warm_harness.serve("again", prompt + [], sampling)
    assert first == cold and again[3] > 0
    assert again[:3] == cold[:3]


def test_turn_two_reusing_turn_one_equals_a_cold_turn_two(tiny):
    system = text(3, 200)
    turn1 = chat_prompt(system, [(text(4, 25), None)])
    warm = Harness(tiny)
    reply, _, _, _ = warm.serve("t1", turn1, max_tokens=12)
    turn2 = chat_prompt(system, [(text(4, 25), reply), (text(5, 40), None)])
    assert turn2[:len(turn1) - 2] == turn1[:-2]
    hit = warm.serve("t2", turn2, max_tokens=12)
    cold = Harness(tiny).serve("t2", turn2, max_tokens=12)
    assert hit[3] == (len(turn1) - 3) // BLOCK * BLOCK     # turn 1's last <|im_start|>, rounded down
    assert hit[:3] == cold[:3]


@pytest.mark.parametrize("budget", [40, 100], ids=["budget-40", "budget-100"])
def test_chunked_prefill_across_a_checkpoint(tiny, budget):
    prompt = chat_prompt(text(6, 90), [(text(7, 36), None)])
    warm = Harness(tiny, budget=budget)
    first = warm.serve("first", prompt)
    ends = [r.context_len + r.num_tokens for s in warm.steps for r in s.rows]
    snapshot_ends = [s.rows[0].context_len + s.rows[0].num_tokens for s in warm.steps if s.snapshot_states]
    assert snapshot_ends == [80, 128] and {80, 128} <= set(ends)
    second = warm.serve("second", prompt + [9])
    assert second[3] == 128
    cold = Harness(tiny, budget=budget).serve("cold", prompt + [9])
    assert second[:3] == cold[:3] and first[3] == 0


def test_prompt_equal_to_a_cached_prefix_computes_its_last_logits(tiny):
    prompt = chat_prompt(text(8, 90), [(text(9, 36), None)])    # checkpoints at 80 and 128
    warm = Harness(tiny)
    warm.serve("first", prompt)
    exact = prompt[:128]
    hit = warm.serve("exact", exact)
    cold = Harness(tiny).serve("cold", exact)
    assert hit[3] == 80 and len(hit[0]) == 8
    assert hit[:3] == cold[:3]


def test_cache_off_takes_no_snapshots(tiny):
    prompt = chat_prompt(text(10, 90), [(text(11, 35), None)])
    off = Harness(tiny, enabled=False)
    off.serve("a", prompt)
    again = off.serve("b", prompt)
    assert again[3] == 0 and not any(s.snapshot_states or s.restore_states for s in off.steps)
    assert off.sched.prefix_cache.num_entries == 0


def test_state_copies_read_every_source_first_and_check_slots(tiny):
    model, config = tiny
    cache = ModelCache(config, 4, BLOCK, 3, device="cpu", dtype=torch.float32)
    for slot in range(3):
        cache.recurrent_state[:, slot] = slot + 1
        cache.conv_state[:, slot] = 10 * (slot + 1)
    cache.copy_slots([0, 1], [1, 2])                       # slot 1 is written and read: its old state moves on
    assert [float(cache.recurrent_state[0, s].max()) for s in range(3)] == [1.0, 1.0, 2.0]
    assert [float(cache.conv_state[0, s].max()) for s in range(3)] == [10.0, 10.0, 20.0]
    runner = ModelRunner(model, config, cache, config.vocab_size)
    step = pb.PackedStep(step_id=1, token_ids=[5], restore_states=[pb.StateCopy(src_slot=7, dst_slot=0)])
    step.rows.add(req_id="x", num_tokens=1, context_len=16, state_slot=0, block_table=[0, 1], sample=False)
    assert "state copy slot 7" in runner.execute(step).error


@pytest.mark.parametrize("budget", [100, 2048], ids=["budget-100", "budget-2048"])
def test_raw_prompt_hit_equals_a_cold_run(tiny, budget):
    """A prompt with no <|im_start|> (a raw completion) is checkpointed every 256 tokens (the grid's least step); a
    repeat starts from 512 with a cold run's bits, its prefill chunks ending at the same grid points."""
    prompt = text(12, 600)
    warm = Harness(tiny, budget=budget)
    first = warm.serve("first", prompt)
    again = warm.serve("again", prompt, SEEDED)
    cold = Harness(tiny, budget=budget).serve("cold", prompt, SEEDED)
    assert first[3] == 0 and again[3] == 512
    assert again[:3] == cold[:3]


@pytest.mark.parametrize("anchor_at", [17, 31, 32, 41])
def test_a_hit_at_every_boundary_gives_the_suffix_its_cold_bits(tiny, anchor_at):
    """The checkpoint (an <|im_start|>) a token before, at or past a block boundary, or a prefill chunk (budget 40)
    off it, then 0, 1 or 3 more tokens: the hit restores the KV blocks and the GDN recurrent and conv state there (the
    conv window, 3 tokens, is longer than a 1-token suffix) and the rest is the cold run's, bit for bit. The kinds of
    fault hybrid engines had there: a suffix run from a blank state (sgl-project/sglang#29368), the attention hit kept
    while the recurrent state missed (vllm-project/vllm#43090)."""
    warm = Harness(tiny, budget=40, min_tokens=16)
    shared = text(20, anchor_at) + [IM_START]
    warm.serve("creator", shared + text(21, 9), max_tokens=2)
    for k in (0, 1, 3):
        prompt = shared + text(22 + k, k)
        hit = warm.serve(f"suffix-{k}", prompt, max_tokens=3)
        cold = Harness(tiny, budget=40, min_tokens=16).serve("cold", prompt, max_tokens=3)
        assert hit[3] == anchor_at - anchor_at % BLOCK, k
        assert hit[:3] == cold[:3], k


@pytest.mark.parametrize("steps_before_abort", [2, 5])
def test_a_hit_on_the_entry_of_an_aborted_request_gives_the_cold_bits(tiny, steps_before_abort):
    """The request that wrote an entry is aborted mid-prefill (2 steps: 40 tokens, then 24 up to
    the checkpoint at 64) or mid-decode (5): the entry
    its finished steps wrote serves a later request as a cold run would (sgl-project/sglang#28374 cached an aborted
    request's state)."""
    warm = Harness(tiny, budget=40, min_tokens=16)
    shared = text(30, 70) + [IM_START] + text(31, 20)
    warm.sched.add_request(Request("aborted", shared + text(32, 30), GREEDY, 8))
    for _ in range(steps_before_abort):
        warm.sched.update(warm.runner.execute(warm.sched.schedule()))
    warm.sched.abort("aborted")
    prompt = shared + text(33, 5)
    hit = warm.serve("after", prompt, max_tokens=3)
    cold = Harness(tiny, budget=40, min_tokens=16).serve("cold", prompt, max_tokens=3)
    assert hit[3] == 64 and hit[:3] == cold[:3]
