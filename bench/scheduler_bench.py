"""Bench (its own process, plus one worker process): the seed workload through the real scheduler engine and worker.

design.md section 8: C streams of a 256-token prompt -> 256 tokens, then 50 ms later one 512-token prompt -> 8
tokens; greedy, EOS ignored, distinct prompts. Drives scheduler.engine.Engine in-process (no gRPC) against a
`python -m worker.server` subprocess on the tiny model (CPU). Prints tokens/s and per-step scheduling overhead
(time outside the worker's forward + sampling), writes bench/out/scheduler_bench.{md,png}.
Run: python -m bench.scheduler_bench [--concurrency 1 2 4 ...] [--reps 3] [--gen-tokens 256]
"""
import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time

from prometheus_client import CollectorRegistry

from bench.plotting import pyplot
from proto import pb
from scheduler.config import SchedulerConfig
from scheduler.engine import Engine
from scheduler.engine_stats import EngineStats
from scheduler.metrics import Metrics
from scheduler.wire import WorkerLink
from tests.e2e.stack import REPO, die_with_parent, free_port, kill
from worker.model_card import load_model_card

OUT_DIR = os.path.join(REPO, "bench", "out")


def make_prompt(stream: int, length: int, vocab: int) -> list:
    # Distinct per stream; ids in [3, vocab - 16) away from special tokens.
    return [(stream * 7919 + j * 104729 + j * j) % (vocab - 19) + 3 for j in range(length)]


async def drain(queue) -> int:
    num_tokens = 0
    while True:
        item = await queue.get()
        if isinstance(item, Exception):
            raise item
        num_tokens += len(item.token_ids)
        if item.finish_reason:
            return num_tokens


def engine_state(engine: Engine) -> str:
    tasks = [f"{t.get_coro().__name__}: {'done ' + repr(t.exception()) if t.done() else 'running'}"
             for t in engine.tasks]
    return (f"worker_alive={engine.worker_alive} inflight={[f.step.step_id for f in engine.inflight]} "
            f"running={engine.scheduler.num_running} waiting={engine.scheduler.num_waiting} tasks={tasks}")


async def run_workload(engine: Engine, concurrency: int, args, vocab: int, rep: int) -> dict:
    engine.stats = EngineStats()
    base = 1000 * concurrency + 100 * rep
    start = time.perf_counter()
    queues = [engine.submit(pb.GenerateRequest(
        req_id=f"c{concurrency}-r{rep}-s{i}", prompt_token_ids=make_prompt(base + i, args.prompt_tokens, vocab),
        max_tokens=args.gen_tokens, ignore_eos=True)) for i in range(concurrency)]
    streams = [asyncio.create_task(drain(q)) for q in queues]
    await asyncio.sleep(0.05)
    late = engine.submit(pb.GenerateRequest(
        req_id=f"c{concurrency}-r{rep}-late", prompt_token_ids=make_prompt(base + 99, 2 * args.prompt_tokens, vocab),
        max_tokens=8, ignore_eos=True))
    try:
        num_tokens = sum(await asyncio.wait_for(asyncio.gather(*streams, drain(late)), timeout=300))
    except asyncio.TimeoutError:
        raise RuntimeError(f"C={concurrency} stalled: {engine_state(engine)}") from None
    wall = time.perf_counter() - start
    stats = engine.stats
    return {"tok_s": num_tokens / wall, "overhead_us": stats.overhead_us_per_step(), "wall_s": wall,
            "steps": stats.num_steps, "forward_ms": stats.forward_ns / max(1, stats.num_steps) / 1e6,
            "schedule_us": stats.schedule_ns / max(1, stats.num_steps) / 1e3,
            "update_us": stats.update_ns / max(1, stats.num_steps) / 1e3,
            "wire_us": (stats.round_trip_ns - stats.forward_ns) / max(1, stats.num_steps) / 1e3}


async def bench(args) -> list:
    card = load_model_card(args.model)
    config = SchedulerConfig(model=args.model, worker_addr=f"tcp://127.0.0.1:{free_port(pair=True)}",
                             max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=64)
    link = WorkerLink(config.worker_addr, "127.0.0.1")
    engine = Engine(config, card, link, Metrics(CollectorRegistry()))
    engine.start()
    # One torch thread: on a 2-core box a second one fights the scheduler process for the CPU.
    env = dict(os.environ, SPARKINFER_MODEL=args.model, SPARKINFER_WORKER_ADDR=config.worker_addr)
    env.setdefault("SPARKINFER_NUM_THREADS", "1")
    worker = subprocess.Popen([sys.executable, "-m", "worker.server"], cwd=REPO, env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, preexec_fn=die_with_parent)
    try:
        await asyncio.wait_for(engine.alive_event.wait(), timeout=120)
        await run_workload(engine, 2, argparse.Namespace(**{**vars(args), "gen_tokens": 4}), card["vocab_size"], 9)
        rows = []
        for concurrency in args.concurrency:
            reps = [await run_workload(engine, concurrency, args, card["vocab_size"], rep) for rep in range(args.reps)]
            median = sorted(reps, key=lambda r: r["tok_s"])[len(reps) // 2]
            median["C"] = concurrency
            median["overhead_us"] = statistics.median(r["overhead_us"] for r in reps)
            rows.append(median)
            print(format_row(median), flush=True)
        return rows, engine.worker_hello.device
    finally:
        await engine.stop()
        kill(worker, wait=5.0)
        link.close()


HEADER = "| C | tok/s | overhead us/step | schedule us | update us | wire us | forward ms/step | steps | wall s |"


def format_row(r: dict) -> str:
    return (f"| {r['C']} | {r['tok_s']:.0f} | {r['overhead_us']:.0f} | {r['schedule_us']:.0f} | {r['update_us']:.0f}"
            f" | {r['wire_us']:.0f} | {r['forward_ms']:.2f} | {r['steps']} | {r['wall_s']:.2f} |")


def overlap_note(rows: list) -> str:
    """What planning step n+1 during step n could save: only the schedule time (update needs step n's tokens)."""
    gains = [r["schedule_us"] / (r["forward_ms"] * 1e3 + r["overhead_us"]) * 100 for r in rows]
    return (f"plan-ahead overlap would hide at most the schedule column: {min(gains):.1f}-{max(gains):.1f}% of step "
            f"time; the rest of the overhead is the process round trip and applying results, which overlap "
            f"cannot hide.")


def write_outputs(rows: list, note: str) -> None:
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "scheduler_bench.md"), "w") as f:
        f.write(note + "\n\n" + HEADER + "\n|" + "---|" * 9 + "\n" + "\n".join(format_row(r) for r in rows) + "\n\n"
                + overlap_note(rows) + "\n")
    plt = pyplot("scheduler_bench.png")
    if plt is None:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    cs = [r["C"] for r in rows]
    left.plot(cs, [r["tok_s"] for r in rows], marker="o")
    left.set(xscale="log", xlabel="concurrent streams C", ylabel="generated tokens / s", title="throughput")
    right.plot(cs, [r["overhead_us"] for r in rows], marker="o", label="outside forward")
    right.plot(cs, [r["forward_ms"] * 1e3 for r in rows], marker="s", label="worker forward + sampling")
    right.set(xscale="log", yscale="log", xlabel="concurrent streams C", ylabel="us per step", title="step time")
    right.legend()
    for ax in (left, right):
        ax.set_xticks(cs, [str(c) for c in cs])
    fig.suptitle(note, fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT_DIR, "scheduler_bench.png"), dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler_bench")
    parser.add_argument("--model", default=os.environ.get("SPARKINFER_MODEL", os.path.join(REPO, "models", "tiny")))
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--gen-tokens", type=int, default=256)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--max-num-batched-tokens", type=int, default=2048)
    args = parser.parse_args(argv)
    note = (f"seed workload on {os.path.basename(args.model)}: C x ({args.prompt_tokens} -> {args.gen_tokens}) "
            f"+ 1 x ({2 * args.prompt_tokens} -> 8) after 50 ms; greedy, eos ignored; median of {args.reps}; "
            f"max_num_batched_tokens {args.max_num_batched_tokens}")
    print(note + "\n" + HEADER, flush=True)
    # SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the worker subprocess is killed on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    load_before = os.getloadavg()[0]
    rows, device = asyncio.run(bench(args))
    note += (f"; worker on {device}; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
             f"({os.cpu_count()} CPUs)")
    write_outputs(rows, note)
    print(overlap_note(rows), flush=True)
    print(f"wrote {OUT_DIR}/scheduler_bench.md and .png", flush=True)


if __name__ == "__main__":
    main()
