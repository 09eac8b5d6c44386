"""Test helper: a seeded random workload driven through the Scheduler as scheduler/engine.py drives it (plan a step
when none is in flight, a lookahead step behind a lone one, results applied oldest first), every invariant of
tests/unit/sched_checks.py checked after each step and each result, every answer against tests/unit/sched_oracle.py.

Workload: arrivals of prompts 1 to 4 chunks (max_num_batched_tokens) long sharing prefixes of random length (with
anchors or not, so the prefix cache is hit on both plans), n > 1 choices (one prompt, several requests), max_tokens
hits, stop ids (with min_tokens), max_tokens 0 (to the context), worker-failed rows; cancels before admission,
mid-prefill and mid-decode (client gone: "abort"; the gateway's stop string: "stop"), the prefix cache reset; small
KV pools and few state slots (preemption, waiting). A prompt that can never fit is refused by admission.check_prompt
(as Engine.submit) and never queued.

    python -m tests.unit.sched_drive 0 500     # seeds [0, 500): counts, and the first failure's seed and message
"""
import random
import sys
from dataclasses import dataclass, field

from proto import pb
from scheduler import admission, lookahead
from scheduler.prefix_cache import PrefixCacheConfig
from scheduler.request import Request
from scheduler.scheduler import Scheduler, SchedulerLimits
from tests.unit.sched_checks import check_pools, check_step, snapshot
from tests.unit.sched_oracle import ANCHOR, STOP_IDS, VOCAB, PositionWorker, Spec


@dataclass
class Setup:
    """One run's sizes (draw_setup draws them from a seed; a shrunk case writes them out)."""
    block_size: int = 16
    num_blocks: int = 32
    num_slots: int = 4
    budget: int = 32
    max_num_seqs: int = 8
    max_model_len: int = 512
    cache: bool = True
    cache_entries: int = 4
    cache_min_tokens: int = 16
    async_scheduling: bool = True
    num_requests: int = 40
    max_output: int = 40          # max_tokens drawn below it
    burst: int = 3                # arrivals at once drawn below it


def draw_setup(rng: random.Random) -> Setup:
    block_size = rng.choice([1, 4, 5, 16, 32])
    budget = rng.choice([1, 3, 8, 16, 33, 64, 128])
    pool_tokens = rng.choice([1, 2, 3, 6, 12]) * max(budget, 48)
    return Setup(block_size, max(1, pool_tokens // block_size), rng.choice([1, 2, 3, 4, 8]), budget,
                 rng.choice([1, 2, 4, 8, 64]), rng.choice([64, 200, 512, 4096]), rng.random() < 0.8,
                 rng.choice([1, 2, 4, 32]), rng.choice([0, 8, 16, 32, 300]), rng.random() < 0.7, rng.randrange(5, 80),
                 rng.choice([40, 150, 400]), rng.choice([3, 3, 12]))


@dataclass
class Tally:
    """What the runs reached (the report's counts)."""
    runs: int = 0
    steps: int = 0
    requests: int = 0
    refused: int = 0
    preemptions: int = 0
    hit_tokens: int = 0
    max_wait: int = 0             # steps planned while one request waited to be seated (arrival or preemption), most
    max_preempted: int = 0        # times one request was preempted, most
    prompt_logprobs: int = 0      # requests whose prompt logprobs came back (of those, preempted before:)
    prompt_logprobs_preempted: int = 0
    cuts: dict = field(default_factory=lambda: {"waiting": 0, "prefill": 0, "decode": 0})
    reasons: dict = field(default_factory=dict)


class Run:
    """One workload on one scheduler; run() raises AssertionError at the first broken invariant."""

    def __init__(self, seed: int, setup: Setup = None, tally: Tally = None):
        self.rng = rng = random.Random(seed)
        self.setup = s = setup or draw_setup(rng)
        cache = PrefixCacheConfig(s.cache, s.cache_entries, s.cache_min_tokens, ANCHOR)
        self.sched = Scheduler(SchedulerLimits(s.budget, s.max_num_seqs), s.num_blocks, s.block_size, s.num_slots,
                               s.max_model_len, prefix_cache=cache)
        self.specs, self.got, self.ended, self.cut = {}, {}, {}, set()
        self.worker = PositionWorker(self.specs, s.num_slots, s.block_size, s.num_blocks, self.sched.max_context_len)
        self.tally = tally or Tally()
        self.bases = [self._base() for _ in range(3)]
        self.inflight, self.last, self.num_arrived = [], None, 0
        self.priorities = self.rng.random() < 0.2
        self.waits, self.reqs, self.reqs_by_id, self.got_prompt = {}, [], {}, set()

    def _base(self) -> list:
        every = self.rng.choice([0, 0, 5, 16, 17])
        return [ANCHOR if every and j and j % every == 0 else self.rng.randrange(10, ANCHOR)
                for j in range(4 * self.setup.budget + self.setup.block_size)]

    def arrive(self) -> None:
        """A new API request: one prompt, n choices (requests), each refused or queued as Engine.submit does."""
        rng, s = self.rng, self.setup
        length = rng.randrange(1, 4 * s.budget + 1) if rng.random() < 0.97 else rng.randrange(1, 2 * s.max_model_len)
        shared = rng.randrange(length + 1)
        prompt = (rng.choice(self.bases)[:shared] + [rng.randrange(10, ANCHOR) for _ in range(length)])[:length]
        max_tokens = 0 if rng.random() < 0.05 else rng.randrange(1, self.setup.max_output)
        if rng.random() < 0.9:      # mostly within the room the prompt leaves (the rest tests the refusal)
            max_tokens = min(max_tokens, max(1, self.sched.max_context_len - length))
        stops = frozenset(rng.sample(STOP_IDS, rng.randrange(len(STOP_IDS) + 1)))
        min_tokens = rng.choice([0, 0, 0, 2, 5]) if max_tokens == 0 or max_tokens >= 5 else 0
        priority = rng.choice([0] * 8 + [-1, 1]) if self.priorities else 0
        salt = rng.choice(["", "", "", "tenant-a"])       # vLLM's cache_salt: entries shared within one only
        for _ in range(1 if rng.random() < 0.8 else rng.randrange(2, 5)):
            req_id = f"r{self.num_arrived}"
            self.num_arrived += 1
            spec = Spec(req_id, self.num_arrived, prompt, max_tokens, stops, min_tokens, rng.choice([0, 0, 5, 20, 80]),
                        rng.randrange(8) if rng.random() < 0.03 else -1)
            try:
                admission.check_prompt(prompt, max_tokens, self.sched.max_context_len, VOCAB)
            except admission.ContextLengthError:
                assert length >= self.sched.max_context_len or length + max_tokens > self.sched.max_context_len
                self.tally.refused += 1
                continue
            self.specs[req_id] = spec
            sampling = pb.SamplingParams(min_tokens=min_tokens, prompt_logprobs=rng.random() < 0.15)
            self.reqs.append(Request(req_id, list(prompt), sampling, max_tokens, stop_token_ids=stops,
                                     priority=priority, cache_salt=salt))
            self.sched.add_request(self.reqs[-1])
            self.reqs_by_id[req_id] = self.reqs[-1]

    def cancel(self) -> None:
        """A client gone or a stop string matched, aimed at a waiting, prefilling or decoding request."""
        phase = self.rng.choice(["waiting", "prefill", "decode"])
        pool = {"waiting": list(self.sched.waiting),
                "prefill": [r for r in self.sched.running if not r.is_decoding],
                "decode": [r for r in self.sched.running if r.is_decoding]}[phase]
        if pool:
            req = self.rng.choice(pool)
            assert self.sched.abort(req.req_id, self.rng.choice(["abort", "stop"])) is req
            self.cut.add(req.req_id)
            self.tally.cuts[phase] += 1

    def plan(self) -> bool:
        """Plans and 'sends' a step when none is in flight (and a lookahead one); False when nothing can run."""
        sched = self.sched
        if not self.inflight:
            before, num_preemptions = snapshot(sched), sched.num_preemptions
            step = sched.schedule()
            if step is None:
                assert not sched.has_work(), f"work left but nothing planned: {self.stuck()}"
                return False
            check_step(sched, step, before)
            self.check_seated(step, before, num_preemptions)
            for req in sched.waiting:
                self.waits[req.req_id] = self.waits.get(req.req_id, 0) + 1
            for row in step.rows:
                self.tally.max_wait = max(self.tally.max_wait, self.waits.pop(row.req_id, 0))
            self.send(step)
        if len(self.inflight) == 1 and self.setup.async_scheduling:
            before = snapshot(sched)
            ahead = lookahead.plan(sched, self.last)
            if ahead is not None:
                check_step(sched, ahead, before, lookahead=True)
                self.send(ahead)
        return True

    def check_seated(self, step, before: dict, num_preemptions: int) -> None:
        """No waiting while it fits: a step that preempted nothing, left budget over and did not seat the head of the
        queue leaves it unable to fit (Scheduler.head_fits, with the rows planned)."""
        sched = self.sched
        if (not before["waiting"] or num_preemptions != sched.num_preemptions or before["waiting"][0] in
                {r.req_id for r in step.rows} or len(step.token_ids) >= sched.limits.max_num_batched_tokens):
            return
        assert not sched.head_fits(), f"{before['waiting'][0]} fits, not seated: {self.stuck()}"

    def send(self, step) -> None:
        self.inflight.append(self.worker.run(step))
        self.last = step
        self.tally.steps += 1

    def apply(self) -> None:
        """Applies the oldest result; each output checked against its request's known answer."""
        result = self.inflight.pop(0)
        if self.rng.random() < 0.002:
            result = pb.StepResult(step_id=result.step_id, error="device lost")   # every running request fails
        for out in self.sched.update(result):
            req_id = out.req_id
            assert req_id not in self.ended and req_id not in self.cut, f"{req_id}: output after its end"
            got = self.got.setdefault(req_id, [])
            got.extend(out.token_ids)
            want, reason, stop_id = self.specs[req_id].expected(self.sched.max_context_len)
            assert got == want[:len(got)], f"{req_id}: got {got[-5:]} at {len(got)}, want {want[len(got) - 5:len(got)]}"
            self.check_prompt_logprobs(out)
            if result.error:
                assert out.finish_reason == "error" and not out.token_ids, f"{req_id}: {out} in a failed step"
                self.cut.add(req_id)
            elif out.finish_reason:
                assert (got, out.finish_reason, out.stop_token_id) == (want, reason, stop_id), \
                    f"{req_id}: ended {out.finish_reason} after {len(got)}, want {reason} after {len(want)}"
                self.ended[req_id] = out.finish_reason
        check_pools(self.sched)

    def check_prompt_logprobs(self, out) -> None:
        """The first response of a request that asked carries its prompt's positions 1.. once, whole (chunks and
        re-prefills after a preemption merged: scheduler/prompt_logprobs.py); no other response carries any."""
        req = self.reqs_by_id[out.req_id]
        if out.error or not req.sampling.prompt_logprobs or out.req_id in self.got_prompt:
            assert out.error or out.prompt_logprobs is None, f"{out.req_id}: prompt logprobs again"
            return
        self.got_prompt.add(out.req_id)
        prompt, got = self.specs[out.req_id].prompt, out.prompt_logprobs
        assert got is not None and got.first_position == 1 and list(got.token_ids) == prompt[1:], \
            f"{out.req_id}: prompt logprobs {got}"
        self.tally.prompt_logprobs += 1
        self.tally.prompt_logprobs_preempted += req.num_preemptions > 0

    def stuck(self) -> str:
        sched = self.sched
        return (f"{len(sched.running)} running, {len(sched.waiting)} waiting, {sched.block_manager.num_free_blocks} "
                f"blocks and {sched.state_pool.num_free_slots} slots free, {sched.prefix_cache.num_entries} entries")

    def tick(self) -> bool:
        rng = self.rng
        if self.num_arrived < self.setup.num_requests and rng.random() < 0.3:
            for _ in range(rng.randrange(1, self.setup.burst + 1)):
                self.arrive()
        if rng.random() < 0.04:
            self.cancel()
        if rng.random() < 0.005:
            self.sched.prefix_cache.clear()
        planned = self.plan()
        if rng.random() < 0.03:
            self.cancel()    # while the step runs
        if self.inflight:
            self.apply()
        return planned or self.num_arrived < self.setup.num_requests

    def run(self, max_ticks: int = 200_000) -> "Run":
        for _ in range(max_ticks):
            if not self.tick():
                break
        else:
            raise AssertionError(f"no end after {max_ticks} ticks: {self.stuck()}")
        self.finish()
        return self

    def finish(self) -> None:
        """Idle: every request ended once (or was cut), the pools whole once the cache lets go."""
        sched = self.sched
        missing = [r for r in self.specs if r not in self.ended and r not in self.cut]
        assert not missing, f"never ended: {missing[:5]}"
        sched.self_check()
        sched.prefix_cache.clear()
        assert sched.block_manager.num_free_blocks == sched.block_manager.num_total_blocks, "blocks held when idle"
        assert sched.state_pool.num_free_slots == sched.state_pool.num_total_slots, "slots held when idle"
        t = self.tally
        t.runs, t.requests = t.runs + 1, t.requests + len(self.specs)
        t.preemptions += sched.num_preemptions
        t.max_preempted = max([t.max_preempted] + [r.num_preemptions for r in self.reqs])
        t.hit_tokens += sched.prefix_cache.stats.num_hit_tokens
        for reason in self.ended.values():
            t.reasons[reason] = t.reasons.get(reason, 0) + 1


def main(first: int, last: int) -> int:
    tally, failures = Tally(), []
    for seed in range(first, last):
        try:
            Run(seed, tally=tally).run()
        except AssertionError as exc:
            failures.append(seed)
            if len(failures) <= 5:
                print(f"seed {seed}: {exc}", flush=True)
    print(f"seeds {first}..{last}: {tally}; failed {len(failures)}: {failures[:30]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
