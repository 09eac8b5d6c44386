"""Bench: the scheduler's host time per step, the time a step costs on top of the worker's forward (pure ITL loss).

Drives scheduler.engine.Engine in-process against bench/scheduler_host_link.py's InstantLink (a worker that answers
every step at once, its own time subtracted) with the gRPC servicer's Generate generator as each stream's reader, so
what is timed is all the scheduler does per step: plan, serialize the PackedStep, parse the StepResult, apply it,
build and queue every GenerateResponse, update the metrics and hand each response to its stream (the HTTP/2 write of
a real gRPC call is not in it). Host time is the loop thread's CPU time (time.thread_time_ns), not wall time: on a
shared box other processes' turns on the CPU would otherwise count as the scheduler's. Scenarios: 1 / 16 / 64 /
256 decoding requests, and at 64 (256 for the queue) with the prefix cache on, a long prompt's chunked prefill beside
the decodes, stop strings (the gateway's Finish) and stop tokens, top logprobs, grammar-constrained requests, 1000
requests queued behind 256 running, and 64 decoding at a 16k-token context (1000 KV blocks a row, sent once).
Prints ms per step and steps/s; writes bench/out/scheduler_host.{md,png}.
Run: python -m bench.scheduler_host [--steps 400] [--only decode-64 ...] [--compare OLD.md] [--profile NAME]
"""
import argparse
import asyncio
import cProfile
import json
import os
import pstats
import time
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from bench.plotting import pyplot
from bench.scheduler_host_link import InstantLink
from proto import pb
from proto.wire_version import WIRE_VERSION
from scheduler.config import SchedulerConfig
from scheduler.engine import Engine
from scheduler.metrics import Metrics
from scheduler.server import ServingServicer
from tests.e2e.stack import REPO

OUT_DIR = os.path.join(REPO, "bench", "out")
VOCAB, EOS, STOP, ANCHOR = 152_000, 151_999, 151_998, 151_997
CARD = {"max_context_len": 65536, "eos_token_ids": [EOS], "vocab_size": VOCAB, "model_id": "bench",
        "tokenizer_json": json.dumps({"added_tokens": [{"id": ANCHOR, "content": "<|im_start|>"}]}).encode()}
GRAMMAR = json.dumps({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}})
DECODE_STEP_MS = 7.5   # a 27B decode step on the H200 (6-9 ms): the host time's share of a token is against this


@dataclass
class Scenario:
    name: str
    num_running: int
    prompt_tokens: int = 128
    prefix_cache: bool = False
    shared_prefix: int = 0     # tokens every prompt starts with (prefix-cache hits)
    long_prompt: int = 0       # a prompt of this many tokens is always prefilling beside the decodes
    stop_after: int = 0        # streams end after about this many tokens (stop string / stop token) and are replaced
    num_logprobs: int = 0
    grammar: bool = False
    num_queued: int = 0
    warm: int = 0              # steps to run untimed on top of --warm (the prompts' prefill)


SCENARIOS = [Scenario(f"decode-{c}", c) for c in (1, 16, 64, 256)] + [
    Scenario("prefix-cache-64", 64, prompt_tokens=256, prefix_cache=True, shared_prefix=2048),
    Scenario("chunked-prefill-64", 64, long_prompt=16_000),
    Scenario("stop-64", 64, stop_after=40),
    Scenario("logprobs-64", 64, num_logprobs=5),
    Scenario("grammar-64", 64, grammar=True),
    Scenario("queued-1000", 256, num_queued=1000),
    # 1000 KV blocks of 16 tokens a row: each row's table goes to the worker once, then only the blocks it gains.
    Scenario("long-context-64", 64, prompt_tokens=16_000, warm=520)]


class FakeContext:
    """The grpc.aio context Generate uses: metadata goes nowhere, an abort raises."""

    async def send_initial_metadata(self, metadata) -> None:
        return None

    async def abort(self, code, details, trailing_metadata=()) -> None:
        raise RuntimeError(f"{code}: {details}")


class Load:
    """Keeps the scenario's requests coming: num_running streams (replaced when they end), the long prompt, the queue."""

    def __init__(self, scn: Scenario, engine: Engine, servicer, max_tokens: int):
        self.scn, self.engine, self.servicer, self.max_tokens = scn, engine, servicer, max_tokens
        self.num_started, self.num_tokens, self.tasks, self.stopping = 0, 0, set(), False
        self.bodies = {}   # prompt length -> the tokens after a prompt's first 9 (negative: the shared prefix)

    def prompt(self, n: int, length: int) -> list:
        """Distinct per n (its first 8 tokens), the rest made once per length: the bench's own time stays out of the
        scheduler's."""
        if length not in self.bodies:
            self.bodies[length] = [(j * 104729 + j * j) % (VOCAB - 19) + 3 for j in range(length - 9)]
            self.bodies[-length] = [ANCHOR] + [(j * 31) % (VOCAB - 19) + 3 for j in range(self.scn.shared_prefix - 1)]
        own = [ANCHOR] + [(n * 7919 + j * 131) % (VOCAB - 19) + 3 for j in range(8)] + self.bodies[length]
        return (self.bodies[-length] if self.scn.shared_prefix else []) + own

    def start(self, length: int, max_tokens: int, ends: bool) -> None:
        self.num_started += 1
        n, scn = self.num_started, self.scn
        sampling = pb.SamplingParams(temperature=0.0, num_logprobs=scn.num_logprobs)
        request = pb.GenerateRequest(req_id=f"{scn.name}-{n}", prompt_token_ids=self.prompt(n, length),
                                     sampling=sampling, max_tokens=max_tokens, ignore_eos=not scn.stop_after,
                                     stop_token_ids=[STOP] if scn.stop_after else [], group_id=f"g{n}")
        if scn.grammar:
            request.constraint.CopyFrom(pb.Constraint(kind="json_schema", grammar=GRAMMAR))
        task = asyncio.create_task(self.read(request, length, ends))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def read(self, request, length: int, ends: bool) -> None:
        """One stream, read as the gateway reads Generate; with stop_after, a stop string ends it (Finish)."""
        stream = self.servicer.Generate(request, FakeContext())
        num_read = 0
        async for item in stream:
            num_read += len(item.token_ids)
            self.num_tokens += len(item.token_ids)
            if self.scn.stop_after and num_read == self.scn.stop_after + hash(request.req_id) % 8:
                await self.servicer.Finish(pb.FinishRequest(req_id=request.req_id, finish_reason="stop"), None)
                break
        await stream.aclose()
        if not self.stopping and ends:
            self.start(length, self.scn.long_prompt and 1 or self.max_tokens, ends)

    def begin(self) -> None:
        scn = self.scn
        for _ in range(scn.num_running + scn.num_queued):
            self.start(scn.prompt_tokens, self.max_tokens, ends=bool(scn.stop_after))
        if scn.long_prompt:
            self.start(scn.long_prompt, 1, ends=True)

    async def end(self) -> None:
        """No stream replaced any more, the engine stopped, every stream still read cancelled and awaited."""
        self.stopping = True
        await self.engine.stop()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def measure(scn: Scenario, warm: int, steps: int, profile) -> dict:
    hello = pb.WorkerHello(num_blocks=400_000, block_size=16, num_slots=scn.num_running + 64, max_context_len=65536,
                           worker_id="bench", vocab_size=VOCAB, device="instant fake worker", wire_version=WIRE_VERSION)
    link = InstantLink(hello, VOCAB, stop_token=STOP, stop_every=97 if scn.stop_after else 0)
    config = SchedulerConfig(max_num_seqs=scn.num_running + (1 if scn.long_prompt else 0), prefix_cache=int(
        scn.prefix_cache), max_num_batched_tokens=2048, ping_interval_s=0.2, worker_timeout_s=30.0)
    engine = Engine(config, CARD, link, Metrics(CollectorRegistry()))
    servicer = ServingServicer(engine, CARD, REPO)
    engine.start()
    await asyncio.wait_for(engine.alive_event.wait(), 10)
    warm += scn.warm
    load = Load(scn, engine, servicer, max_tokens=warm + steps + 50)
    load.begin()
    sched = engine.scheduler
    while sched.step_id < warm:
        await asyncio.sleep(0.002)
    t0, w0, s0, n0 = time.thread_time_ns(), link.worker_ns, sched.step_id, load.num_tokens
    if profile:
        profile.enable()
    while sched.step_id < s0 + steps:
        await asyncio.sleep(0.002)
    if profile:
        profile.disable()
    t1, w1, s1, n1 = time.thread_time_ns(), link.worker_ns, sched.step_id, load.num_tokens
    row = {"name": scn.name, "running": sched.num_running, "waiting": sched.num_waiting, "steps": s1 - s0,
           "host_ms": (t1 - t0 - (w1 - w0)) / (s1 - s0) / 1e6, "tokens_per_step": (n1 - n0) / (s1 - s0),
           "streams": load.num_started}
    row["steps_s"] = 1e3 / row["host_ms"]
    await load.end()
    return row


async def long_output(num_tokens: int, window: int = 1000) -> dict:
    """One request generating num_tokens (its prompt 128 tokens): host ms a step over its first and its last `window`
    decode steps. What grows with the context (its block table sent whole every step, one more block each 16
    tokens) shows as the late steps' excess over the early ones."""
    scn = Scenario(f"long-output-{num_tokens // 1000}k", 1)
    hello = pb.WorkerHello(num_blocks=400_000, block_size=16, num_slots=64, max_context_len=65536, worker_id="bench",
                           vocab_size=VOCAB, device="instant fake worker", wire_version=WIRE_VERSION)
    link = InstantLink(hello, VOCAB)
    config = SchedulerConfig(max_num_seqs=1, prefix_cache=0, max_num_batched_tokens=2048, ping_interval_s=0.2,
                             worker_timeout_s=30.0)
    engine = Engine(config, CARD, link, Metrics(CollectorRegistry()))
    engine.start()
    await asyncio.wait_for(engine.alive_event.wait(), 10)
    load = Load(scn, engine, ServingServicer(engine, CARD, REPO), max_tokens=num_tokens)
    load.begin()
    marks = []
    for first in (1, num_tokens - window - 8):
        for step in (first, first + window):
            while load.num_tokens < step:
                await asyncio.sleep(0)
            marks.append((time.thread_time_ns() - link.worker_ns, engine.scheduler.step_id))
    await load.end()
    early, late = ((marks[i + 1][0] - marks[i][0]) / (marks[i + 1][1] - marks[i][1]) / 1e6 for i in (0, 2))
    return {"name": scn.name, "early_ms": early, "late_ms": late, "ratio": late / early}


HEADER = ("| scenario | running | waiting | host ms / step | steps / s | tokens / step | % of a 7.5 ms decode step |\n"
          "|---|---|---|---|---|---|---|")


def format_row(r: dict) -> str:
    return (f"| {r['name']} | {r['running']} | {r['waiting']} | {r['host_ms']:.3f} | {r['steps_s']:.0f} | "
            f"{r['tokens_per_step']:.1f} | {r['host_ms'] / DECODE_STEP_MS * 100:.1f}% |")


def read_table(path: str) -> dict:
    """{scenario: host ms per step} from an earlier run's scheduler_host.md (--compare)."""
    with open(path, encoding="utf-8") as f:
        cells = [line.split("|")[1:-1] for line in f if line.startswith("| ") and "scenario" not in line]
    return {c[0].strip(): float(c[3]) for c in cells}


def write_outputs(rows: list, note: str, before: dict) -> None:
    os.makedirs(OUT_DIR, exist_ok=True)
    lines = [format_row(r) for r in rows]
    if before:
        lines += ["", "| scenario | before ms / step | after ms / step | change |", "|---|---|---|---|"] + [
            f"| {r['name']} | {before[r['name']]:.3f} | {r['host_ms']:.3f} | "
            f"{(r['host_ms'] / before[r['name']] - 1) * 100:+.0f}% |" for r in rows if r["name"] in before]
        print("\n".join(lines[len(rows):]), flush=True)
    with open(os.path.join(OUT_DIR, "scheduler_host.md"), "w", encoding="utf-8") as f:
        f.write(note + "\n\n" + HEADER + "\n" + "\n".join(lines) + "\n")
    plt = pyplot("scheduler_host.png")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    names = [r["name"] for r in rows]
    if before:
        ax.barh(names, [before.get(n, 0.0) for n in names], color="lightgrey", label="before (--compare)")
    ax.barh(names, [r["host_ms"] for r in rows], height=0.5, label="this run")
    for i, r in enumerate(rows):
        ax.text(max(r["host_ms"], before.get(r["name"], 0.0)), i, f" {r['host_ms']:.2f} ms ({r['steps_s']:.0f} "
                f"steps/s)", va="center", fontsize=8)
    ax.axvline(DECODE_STEP_MS, color="grey", linestyle="--", label="27B decode step on the H200 (~7.5 ms)")
    ax.set(xlabel="scheduler host ms per step", title="scheduler host time per step (instant fake worker)")
    ax.invert_yaxis()
    ax.legend(loc="upper right", fontsize=8)
    fig.suptitle(note, fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT_DIR, "scheduler_host.png"), dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler_host")
    parser.add_argument("--steps", type=int, default=400, help="steps timed per scenario")
    parser.add_argument("--warm", type=int, default=60, help="steps run first, untimed")
    parser.add_argument("--only", nargs="+", help="scenario names to run (default: all)")
    parser.add_argument("--compare", help="an earlier run's scheduler_host.md: its figures beside these (table, PNG)")
    parser.add_argument("--profile", help="a scenario to profile (cProfile over its timed steps, top 30 by own time)")
    parser.add_argument("--long-output", type=int, metavar="TOKENS",
                        help="only this: one request of TOKENS tokens, host ms a step early and late")
    args = parser.parse_args(argv)
    if args.long_output:
        row = asyncio.run(long_output(args.long_output))
        print(f"| {row['name']} | first 1000 steps {row['early_ms']:.3f} ms / step | last 1000 {row['late_ms']:.3f} "
              f"| x{row['ratio']:.2f} |")
        return
    note = (f"scheduler host time per step (loop-thread CPU): Engine + Generate readers against an instant fake worker "
            f"(its time subtracted); {args.steps} steps after {args.warm}; load average {os.getloadavg()[0]:.1f} "
            f"({os.cpu_count()} CPUs)")
    print(note + "\n" + HEADER, flush=True)
    rows = []
    for scn in SCENARIOS:
        if args.only and scn.name not in args.only:
            continue
        profile = cProfile.Profile() if args.profile == scn.name else None
        rows.append(asyncio.run(measure(scn, args.warm, args.steps, profile)))
        print(format_row(rows[-1]), flush=True)
        if profile:
            pstats.Stats(profile).sort_stats("tottime").print_stats(30)
    write_outputs(rows, note, read_table(args.compare) if args.compare else {})
    print(f"wrote {OUT_DIR}/scheduler_host.md and .png", flush=True)


if __name__ == "__main__":
    main()
