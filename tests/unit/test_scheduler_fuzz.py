"""Unit tests: the scheduler under random load, driven as scheduler/engine.py drives it (a lookahead step planned
behind the one in flight, results applied oldest first), with clients that abort, gateways that end requests on a
stop string, /reset_prefix_cache at any moment, small KV and state pools (preemption, queueing, entries evicted),
prefix-cache hits on anchors and on the grid, several budgets and block sizes. FakeWorker checks every row's state
and the KV it reads back; each request that was not cut short must end with exactly the tokens the model gives its
sequence alone (greedy: a function of prompt + output so far), with its reason, and the pools must be whole after.

The kinds of fault this pins are the hybrid-cache reports of other engines: a prefix hit that restores the recurrent
state but not the attention blocks or the other way round (vllm-project/vllm#43090, sgl-project/sglang#29368), an
aborted request's state left in the cache (sgl-project/sglang#28374), a preempted request recomputed without its
output (vllm-project/vllm-gaudi#541), blocks leaked by aborts (sgl-project/sglang#8352)."""
import random

import pytest

from proto import pb
from scheduler import lookahead
from scheduler.prefix_cache import PrefixCacheConfig
from scheduler.request import Request
from scheduler.scheduler import Scheduler, SchedulerLimits
from tests.unit.test_scheduler import VOCAB, FakeWorker

ANCHOR = VOCAB - 1             # stands for <|im_start|>
STOP_IDS = frozenset(range(10))  # a sampled id below 10 ends a request that does not ignore them (1 in 100)


def alone(prompt: list, max_tokens: int, stops: frozenset, max_context_len: int) -> tuple:
    """(output ids, finish reason) of a request served alone: FakeWorker's token is its rolling hash of the sequence."""
    h = 0
    for t in prompt:
        h = (h * 1_000_003 + t + 1) % (2 ** 61 - 1)
    out = []
    while True:
        token = h % VOCAB
        if token in stops:
            return out, "stop"
        out.append(token)
        h = (h * 1_000_003 + token + 1) % (2 ** 61 - 1)
        if len(out) >= max_tokens or len(prompt) + len(out) >= max_context_len:
            return out, "length"


class Load:
    """A random workload on one scheduler: prompts that share prefixes of a few bases (with anchors or without)."""

    def __init__(self, rng: random.Random, sched: Scheduler, max_context_len: int):
        self.rng, self.sched, self.max_context_len = rng, sched, max_context_len
        self.bases = [self._base() for _ in range(4)]
        self.specs, self.cut = {}, set()

    def _base(self) -> list:
        every = self.rng.choice([0, 5, 16, 17, 40])
        return [ANCHOR if every and j and j % every == 0 else self.rng.randrange(10, VOCAB - 1)
                for j in range(self.rng.randrange(1, self.max_context_len // 2))]

    def add(self) -> None:
        rng = self.rng
        base = rng.choice(self.bases)
        tail = [ANCHOR if rng.random() < 0.1 else rng.randrange(10, VOCAB - 1) for _ in range(rng.randrange(1, 40))]
        prompt = (base[:rng.randrange(len(base) + 1)] + tail)[:self.max_context_len - 2]
        max_tokens = rng.randrange(1, min(60, self.max_context_len - len(prompt)) + 1)
        stops = frozenset() if rng.random() < 0.5 else STOP_IDS
        req_id = f"r{len(self.specs)}"
        self.specs[req_id] = (prompt, max_tokens, stops)
        sampling = pb.SamplingParams(prompt_logprobs=rng.random() < 0.1)
        self.sched.add_request(Request(req_id, prompt, sampling, max_tokens, eos_token_ids=stops,
                                       priority=rng.choice([0, 0, 0, 1, -1])))

    def cut_one(self, reason: str) -> None:
        """A client gone ("abort") or a stop string matched by the gateway ("stop"): Scheduler.abort."""
        if self.sched.requests:
            req_id = self.rng.choice(sorted(self.sched.requests))
            self.sched.abort(req_id, reason)
            self.cut.add(req_id)


def drive(seed: int, block_size: int) -> tuple:
    """Runs one random workload to its end; returns (ids of the requests whose answer differs from their answer
    alone, the scheduler)."""
    rng = random.Random(seed)
    # pools of 192 to 1024 tokens whatever the block size, so that every size preempts
    num_blocks, num_slots = rng.choice([192, 256, 384, 640, 1024]) // block_size, rng.choice([2, 3, 4, 6, 8, 16])
    budget = rng.choice([1, 5, 16, 17, 31, 48, 64, 256])
    max_context_len = min(1024, num_blocks * block_size)
    cache = PrefixCacheConfig(enabled=rng.random() < 0.8, max_entries=rng.choice([1, 2, 4, 32]),
                              min_tokens=rng.choice([0, 16, 20, 32, 300]), anchor_token_id=ANCHOR)
    limits = SchedulerLimits(budget, min(rng.choice([1, 2, 4, 8, 64]), budget))
    sched = Scheduler(limits, num_blocks, block_size, num_slots, max_context_len, prefix_cache=cache)
    worker, load, outputs, reasons = FakeWorker(num_slots, block_size), Load(rng, sched, max_context_len), {}, {}
    async_scheduling, inflight = rng.random() < 0.7, []
    for _ in range(rng.randrange(1, 12)):
        load.add()
    for _ in range(3000):
        event = rng.random()
        if event < 0.08 and len(load.specs) < 60:
            for _ in range(rng.randrange(1, 5)):
                load.add()
        elif event < 0.11:
            load.cut_one(rng.choice(["abort", "stop"]))
        elif event < 0.115:
            sched.prefix_cache.clear()
        if not inflight:
            step = sched.schedule()
            if step is None:
                if len(load.specs) >= 20 and not sched.has_work():
                    break
                load.add()
                continue
            inflight.append(worker.run(step))
            last = step
        if len(inflight) == 1 and async_scheduling:
            ahead = lookahead.plan(sched, last)
            if ahead is not None:
                inflight.append(worker.run(ahead))
                last = ahead
        if rng.random() < 0.05:
            load.cut_one("abort")   # the client leaves while its step runs
        for out in sched.update(inflight.pop(0)):
            outputs.setdefault(out.req_id, []).extend(out.token_ids)
            reasons[out.req_id] = out.finish_reason or reasons.get(out.req_id)
    mismatches = [req_id for req_id, (prompt, max_tokens, stops) in load.specs.items() if req_id not in load.cut
                  and (outputs.get(req_id, []), reasons.get(req_id)) != alone(prompt, max_tokens, stops,
                                                                               max_context_len)]
    return mismatches, sched


@pytest.mark.parametrize("block_size", [16, 5, 32], ids=["block16", "block5", "block32"])
def test_every_request_gets_its_solo_tokens_and_the_pools_come_back(block_size):
    num_preemptions = num_hit_tokens = 0
    for seed in range(30):
        mismatches, sched = drive(seed, block_size)
        assert not mismatches, f"seed {seed}: {mismatches[:5]} differ from their solo runs"
        assert not sched.has_work() and sched.prefix_cache.leak() == "", f"seed {seed}"
        num_preemptions += sched.num_preemptions
        num_hit_tokens += sched.prefix_cache.stats.num_hit_tokens
    # The workloads reach what they are for.
    assert num_preemptions > 0 and num_hit_tokens > 0
