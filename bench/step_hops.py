"""Bench: where a decode step's time goes between the GPU and the scheduler, hop by hop, at C = 1.

Drives scheduler.engine.Engine in-process against bench/step_hops_worker.py (the worker with timestamps), one
request at a time (256-token prompt, greedy, eos ignored), and prints the median and p90 of each hop in us: scheduler
send -> worker I/O thread -> launch -> finish -> result handed over -> I/O thread sends -> scheduler receives ->
step loop applies -> next send. perf_counter_ns is CLOCK_MONOTONIC on Linux, one clock for both processes. With
asynchronous scheduling (SPARKINFER_ASYNC_SCHEDULING, default on) step n + 1 is sent before n's result, so the
"next send" hop is negative there; run with SPARKINFER_ASYNC_SCHEDULING=0 for the synchronous loop's hops.
Run: python -m bench.step_hops --model DIR [--gen-tokens 128]
"""
import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from prometheus_client import CollectorRegistry

from proto import pb
from scheduler.config import SchedulerConfig, parse_config
from scheduler.engine import Engine
from scheduler.metrics import Metrics
from scheduler.wire import WorkerLink
from tests.e2e.stack import REPO, die_with_parent, free_port, kill
from worker.model_card import load_model_card

HOPS = (("send -> worker I/O thread", "s:send", "w:io_in"), ("I/O thread -> launch", "w:io_in", "w:launch"),
        ("launch -> finish (compute)", "w:launch", "w:finish"), ("finish -> handed over", "w:finish", "w:handed_over"),
        ("handed over -> I/O sends", "w:handed_over", "w:io_out"), ("I/O sends -> scheduler recv", "w:io_out", "s:recv"),
        ("recv -> step loop applies", "s:recv", "s:apply"), ("apply (update + publish)", "s:apply", "s:applied"),
        ("applied -> next send", "s:applied", "s:next_send"))


def _instrument(engine: Engine, marks: dict) -> None:
    def mark(step_id, key):
        marks.setdefault(step_id, {})[key] = time.perf_counter_ns()
    send, update = engine.link.send, engine.scheduler.update

    def timed_send(msg):
        if msg.WhichOneof("kind") == "step":
            mark(msg.step.step_id, "s:send")
            mark(msg.step.step_id - 1, "s:next_send")
        return send(msg)

    def timed_update(result):
        mark(result.step_id, "s:apply")
        out = update(result)
        mark(result.step_id, "s:applied")
        return out
    resolve = engine.handle_result

    def timed_resolve(result):
        mark(result.step_id, "s:recv")
        resolve(result)
    engine.link.send, engine.scheduler.update = timed_send, timed_update
    engine.handlers["result"] = timed_resolve


async def _serve(model: str, gen_tokens: int, out_path: str) -> dict:
    card = load_model_card(model)
    config = SchedulerConfig(model=model, worker_addr=f"tcp://127.0.0.1:{free_port(pair=True)}",
                             async_scheduling=parse_config([]).async_scheduling)
    link = WorkerLink(config.worker_addr, "127.0.0.1")
    engine, marks = Engine(config, card, link, Metrics(CollectorRegistry())), {}
    _instrument(engine, marks)
    engine.start()
    env = dict(os.environ, SPARKINFER_MODEL=model, SPARKINFER_WORKER_ADDR=config.worker_addr, STEP_HOPS_OUT=out_path)
    worker = subprocess.Popen([sys.executable, "-m", "bench.step_hops_worker"], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent)
    try:
        await asyncio.wait_for(engine.alive_event.wait(), timeout=600)
        for rep in range(2):
            queue = engine.submit(pb.GenerateRequest(req_id=f"r{rep}", prompt_token_ids=list(range(10, 266)),
                                                     max_tokens=gen_tokens, ignore_eos=True))
            while True:
                item = await queue.get()
                if isinstance(item, Exception) or item.finish_reason:
                    break
        await asyncio.sleep(0.5)
    finally:
        await engine.stop()
        kill(worker, wait=5.0)
        link.close()
    return marks


def report(sched: dict, work: dict) -> list:
    """[(hop, median us, p90 us, count)] over the steps both sides recorded (the first 5 skipped: warm-up)."""
    rows = []
    steps = sorted(set(sched) & set(work))[5:]
    for name, a, b in HOPS:
        values = []
        for sid in steps:
            both = {**{"s:" + k[2:]: v for k, v in sched[sid].items()}, **{"w:" + k: v for k, v in work[sid].items()}}
            if a in both and b in both:
                values.append((both[b] - both[a]) / 1e3)
        if values:
            values.sort()
            rows.append((name, statistics.median(values), values[int(0.9 * (len(values) - 1))], len(values)))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.step_hops")
    parser.add_argument("--model", default=os.path.join(REPO, "models", "tiny"))
    parser.add_argument("--gen-tokens", type=int, default=128)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "worker.json")
        sched = asyncio.run(_serve(args.model, args.gen_tokens, out_path))
        with open(out_path, encoding="utf-8") as f:
            work = {int(k): v for k, v in json.load(f).items()}
    print("| hop | median us | p90 us | steps |\n| --- | --- | --- | --- |")
    for name, median, p90, count in report(sched, work):
        print(f"| {name} | {median:.1f} | {p90:.1f} | {count} |")


if __name__ == "__main__":
    main()
