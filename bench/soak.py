"""Soak bench: the whole stack (deploy/launch.py, the tiny model, a small KV pool so requests preempt and prefix-cache
entries are evicted) under seeded random requests over every generation API from many concurrent clients, some cut
by their clients (the socket closed mid-prefill or mid-stream, a short timeout), some malformed; then, with the stack
idle, what it must have let go of (bench/soak_checks.py) and its processes' memory after a warm-up and after the soak.

    python -m bench.soak [--requests 2000] [--concurrency 48] [--seed 0]

Prints a table per API (requests, answers checked, cut, errors by status, p50 / p99 latency), the leaks found and
each process's RSS; exits 1 if an answer was malformed (bench/soak_shapes.py), a leak was found, or memory grew past
--max-growth-mib per 1000 requests."""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections import Counter, defaultdict

import aiohttp

from bench import soak_checks
from bench.soak_cases import APIS, Case, CaseMaker
from bench.soak_shapes import problems

STACK_ENV = {"SPARKINFER_MAX_NUM_BATCHED_TOKENS": "256", "SPARKINFER_PREFIX_CACHE_MIN_TOKENS": "32",
             "SPARKINFER_PREFIX_CACHE_ENTRIES": "4", "SPARKINFER_NUM_STATE_SLOTS": "32"}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests after the warm-up")
    parser.add_argument("--warmup", type=int, default=200, help="requests before the first memory reading")
    parser.add_argument("--concurrency", type=int, default=48, help="clients, each one request at a time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kv-blocks", type=int, default=64, help="KV blocks of 16 tokens (the pool to preempt)")
    parser.add_argument("--max-model-len", type=int, default=768)
    parser.add_argument("--max-growth-mib", type=float, default=20.0, help="RSS growth per 1000 requests = a leak")
    parser.add_argument("--model", default="models/tiny")
    parser.add_argument("--log", default="/tmp/soak-stack.log", help="the stack's output")
    return parser.parse_args(argv)


class Result:
    __slots__ = ("case", "status", "seconds", "problems", "cut")

    def __init__(self, case: Case, status: int, seconds: float, found: list, cut: bool):
        self.case, self.status, self.seconds, self.problems, self.cut = case, status, seconds, found, cut


async def _read_some(resp: aiohttp.ClientResponse, num_chunks: int) -> None:
    """Reads a few chunks of a stream, then closes the connection under it (the client goes away mid-stream)."""
    seen = 0
    async for _ in resp.content.iter_any():
        seen += 1
        if seen >= num_chunks:
            break
    resp.close()


async def send(session: aiohttp.ClientSession, base: str, case: Case, rng: random.Random) -> Result:
    """One request as its Case says; the whole answer checked unless its client cut it."""
    start = time.perf_counter()
    data = case.body if isinstance(case.body, bytes) else None
    kwargs = {"data": data, "headers": {"Content-Type": "application/json"}} if data else {"json": case.body}
    timeout = aiohttp.ClientTimeout(total=rng.uniform(0.05, 1.5)) if case.cut == "timeout" else None
    try:
        if case.cut == "prefill":
            task = asyncio.ensure_future(session.post(base + case.path, **kwargs))
            await asyncio.sleep(rng.uniform(0.0, 0.08))
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return Result(case, 0, time.perf_counter() - start, [], True)
            resp = task.result()
            resp.close()
            return Result(case, resp.status, time.perf_counter() - start, [], True)
        async with session.post(base + case.path, timeout=timeout or aiohttp.ClientTimeout(total=600),
                                **kwargs) as resp:
            if case.cut == "stream" and resp.status == 200:
                await _read_some(resp, rng.randint(1, 6))
                return Result(case, resp.status, time.perf_counter() - start, [], True)
            body = await resp.read()
            status = resp.status
    except asyncio.TimeoutError:
        return Result(case, 0, time.perf_counter() - start, [], True)
    except aiohttp.ClientError as exc:
        return Result(case, -1, time.perf_counter() - start, [f"client error {exc!r}"], False)
    return Result(case, status, time.perf_counter() - start, problems(case, status, body), False)


async def drive(base: str, cases: list, concurrency: int, seed: int) -> list:
    """Each of `concurrency` clients (its own keep-alive session) takes the next case until none is left."""
    todo = list(reversed(cases))
    results = []

    async def client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
            while todo:
                results.append(await send(session, base, todo.pop(), rng))

    await asyncio.gather(*(client(i) for i in range(concurrency)))
    return results


def percentile(values: list, q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def table(results: list) -> str:
    """Per API: requests, answers checked, cut by their clients, malformed, statuses, p50 / p99 seconds."""
    rows = ["| API | requests | checked | cut | malformed | statuses | p50 s | p99 s |", "| --- " * 8 + "|"]
    by_api = defaultdict(list)
    for r in results:
        by_api[r.case.api].append(r)
    for api in APIS + ("all",):
        group = results if api == "all" else by_api.get(api, [])
        whole = [r.seconds for r in group if not r.cut and r.status == 200]
        statuses = Counter(r.status for r in group if not r.cut)
        rows.append(f"| {api} | {len(group)} | {sum(not r.cut for r in group)} | {sum(r.cut for r in group)} | "
                    f"{sum(bool(r.problems) for r in group)} | "
                    f"{' '.join(f'{s}:{c}' for s, c in sorted(statuses.items()))} | "
                    f"{percentile(whole, 0.5):.2f} | {percentile(whole, 0.99):.2f} |")
    return "\n".join(rows)


def memory(launcher_pid: int) -> dict:
    return {name: soak_checks.rss_mib(pid) for name, pid in soak_checks.process_ids(launcher_pid).items()}


def phase(stack, name: str, cases: list, args) -> tuple:
    """Runs `cases`, waits for the stack to go idle; -> (results, leaks, RSS MiB per process)."""
    start = time.perf_counter()
    results = asyncio.run(drive(stack.base, cases, args.concurrency, args.seed))
    print(f"[soak] {name}: {len(results)} requests in {time.perf_counter() - start:.0f} s", flush=True)
    port = int(stack.base.rsplit(":", 1)[1])
    leaks = soak_checks.idle_leaks(stack.metrics_url, stack.base, stack.env["SPARKINFER_SCHEDULER_ADDR"], port)
    # Printed, not failed: a cut that races the scheduler's admission or its first token is seen by one of the two
    # processes only (README, the gateway's /metrics), a few in 1000 cut requests.
    for line in soak_checks.counter_mismatches(stack.metrics_url, stack.base):
        print(f"[soak] after the {name}, the gateway's counter differs from the scheduler's: {line}", flush=True)
    return results, leaks, memory(stack.proc.pid)


def report(results: list, leaks: list, rss: tuple, args) -> int:
    print(table(results))
    bad = [r for r in results if r.problems]
    for r in bad[:20]:
        body = r.case.body if isinstance(r.case.body, bytes) else {k: v for k, v in r.case.body.items()
                                                                  if k not in ("messages", "prompt", "input", "text")}
        print(f"  malformed {r.case.api} stream={r.case.stream}: {r.problems[:2]} body={str(body)[:300]}")
    warm, after = rss
    grown = []
    print("| process | RSS after warm-up MiB | after the soak MiB | growth per 1000 requests MiB |")
    print("| --- | --- | --- | --- |")
    for name in warm:
        per_1000 = (after.get(name, 0) - warm[name]) * 1000 / max(1, args.requests)
        print(f"| {name} | {warm[name]:.1f} | {after.get(name, 0):.1f} | {per_1000:+.1f} |")
        if per_1000 > args.max_growth_mib:
            grown.append(f"{name} RSS grew {per_1000:.1f} MiB per 1000 requests")
    print("leaks found:", "; ".join(leaks + grown) if leaks or grown else "none")
    return 1 if bad or leaks or grown else 0


def main(argv=None) -> int:
    from bench.serve_stack import ServeStack

    args = parse_args(argv)
    maker = CaseMaker(args.seed, args.max_model_len)
    warmup = [maker.make() for _ in range(args.warmup)]
    soak = [maker.make() for _ in range(args.requests)]
    env = dict(STACK_ENV, SPARKINFER_NUM_KV_BLOCKS=str(args.kv_blocks),
               SPARKINFER_MAX_MODEL_LEN=str(args.max_model_len))
    env = {k: os.environ.get(k, v) for k, v in env.items()}
    print(f"[soak] stack: {env}", flush=True)
    with ServeStack(args.model, env, args.log) as stack:
        warm_results, warm_leaks, warm_rss = phase(stack, "warm-up", warmup, args)
        results, leaks, rss = phase(stack, "soak", soak, args)
        preempted = soak_checks.scrape(stack.metrics_url).get("sparkinfer_num_preemptions_total", 0)
    print(f"[soak] preemptions: {preempted:.0f}")
    return report(warm_results + results, [f"after the warm-up: {x}" for x in warm_leaks] + leaks,
                  (warm_rss, rss), args)


if __name__ == "__main__":
    sys.exit(main())
