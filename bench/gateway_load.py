"""Bench (its own process, plus a gateway and a fake scheduler, bench/gateway_procs.py): the gateway's own CPU cost
per streamed token and per request, on a token source that is never the bottleneck.

The fake scheduler (gateway/fake_scheduler.py) sends each request's --max-tokens ids at once, one per message (as a
decode step does), never the eos. For each route and concurrency C this process runs C clients back to back for
--seconds and reads the gateway process's CPU time (/proc/PID/stat utime + stime) before and after. `tok/cpu-s` is
the streamed tokens per second of gateway CPU: what one gateway process sustains on one core of its own, whatever
else the machine runs (wall tok/s is printed too; on a shared machine the clients and the fake scheduler take their
part of the cores). Then the per-request cost of long chats (100 turns, with and without tools): gateway CPU ms a
request over HTTP (max_tokens 1) and, in this process, the chat template's render and the tokenizer's encode alone.
With --in-process the gateway, its clients and the token source share this process and its event loop (no gRPC:
bench/gateway_procs.py's DirectClient), and the CPU time is this process's: figures that hold on a busy machine
(they include the clients' reading), where the three-process ones move with what else runs.
Prints one table per part and the tokens per CPU-second of every route and C side by side, writes gateway_load.csv
and gateway_load.png to $OUT (else bench/out); with --profile, the gateway runs under cProfile and its top functions
by own time are printed (stats in gateway_load.prof).
Run: python -m bench.gateway_load [--in-process] [--routes chat_stream,chat,completions,api_chat,messages]
     [--concurrency 1,16,64,256] [--seconds 3] [--profile]
"""
import argparse
import asyncio
import os
import pstats
import signal
import subprocess
import sys
import time
import urllib.request

import aiohttp

from bench.gateway_chats import long_chat_rows
from bench.output import output_dir, write_csv
from bench.plotting import pyplot
from tests.e2e.stack import REPO, die_with_parent, kill

MODEL = "fake-model"
USER = [{"role": "user", "content": "Say something."}]
# route name -> (path, body without max_tokens, the body's max_tokens field)
ROUTES = {
    "chat_stream": ("/v1/chat/completions", {"model": MODEL, "messages": USER, "stream": True}, "max_tokens"),
    "chat": ("/v1/chat/completions", {"model": MODEL, "messages": USER}, "max_tokens"),
    "completions": ("/v1/completions", {"model": MODEL, "prompt": "Say something.", "stream": True}, "max_tokens"),
    "api_chat": ("/api/chat", {"model": MODEL, "messages": USER}, "num_predict"),
    "messages": ("/v1/messages", {"model": MODEL, "messages": USER, "stream": True}, "max_tokens"),
}
TICKS = os.sysconf("SC_CLK_TCK")


def body_of(route: str, max_tokens: int) -> dict:
    path, body, field = ROUTES[route]
    if field == "num_predict":
        return dict(body, options={"num_predict": max_tokens})
    return dict(body, **{field: max_tokens})


def cpu_seconds(pid: int) -> float:
    """utime + stime of process pid (its threads included)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def one_request(session: aiohttp.ClientSession, url: str, body: dict) -> None:
    async with session.post(url, json=body) as resp:
        async for _ in resp.content.iter_any():
            pass
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status}")


async def load(base: str, path: str, body: dict, concurrency: int, seconds: float) -> int:
    """Runs `concurrency` clients sending body back to back until `seconds` pass; returns the requests finished."""
    done = 0
    end = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:
        async def client():
            nonlocal done
            while time.monotonic() < end:
                await one_request(session, base + path, body)
                done += 1
        await asyncio.gather(*(client() for _ in range(concurrency)))
    return done


def measure(base: str, pid: int, path: str, body: dict, concurrency: int, seconds: float) -> tuple:
    """(requests, wall s, gateway CPU s) of one load level, after a short warm-up at the same concurrency."""
    asyncio.run(load(base, path, body, concurrency, 0.3))
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    num = asyncio.run(load(base, path, body, concurrency, seconds))
    return num, time.monotonic() - t0, cpu_seconds(pid) - cpu0


def level_row(route: str, concurrency: int, num: int, wall: float, cpu: float, max_tokens: int) -> dict:
    """A table row (printed) of one load level."""
    tokens = num * max_tokens
    row = {"route": route, "concurrency": concurrency, "requests": num, "tokens": tokens,
           "wall_tok_s": tokens / wall, "cpu_pct": 100 * cpu / wall, "tok_per_cpu_s": tokens / max(cpu, 1e-9),
           "cpu_us_per_token": 1e6 * cpu / max(tokens, 1)}
    print(f"| {route} | {concurrency} | {num} | {tokens} | {row['wall_tok_s']:.0f} | {row['cpu_pct']:.0f} | "
          f"{row['tok_per_cpu_s']:.0f} | {row['cpu_us_per_token']:.1f} |", flush=True)
    return row


def print_header(what: str) -> None:
    print(f"| route | C | requests | tokens | wall tok/s | {what} CPU % | tok/cpu-s | CPU us/token |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")


def stream_rows(base: str, pid: int, args) -> list:
    print_header("gateway")
    rows = []
    for route in args.routes:
        for concurrency in args.levels:
            num, wall, cpu = measure(base, pid, ROUTES[route][0], body_of(route, args.max_tokens), concurrency,
                                     args.seconds)
            rows.append(level_row(route, concurrency, num, wall, cpu, args.max_tokens))
    return rows


async def in_process_rows(args) -> list:
    """stream_rows with the gateway, its clients and the token source in this one process (bench.gateway_procs'
    DirectClient, no gRPC): the CPU time is this process's, so the figures hold on a busy machine; they include the
    clients' reading."""
    from bench.gateway_procs import DirectClient, direct_fake
    from gateway.app import create_app
    from gateway.config import GatewayConfig
    from gateway.fake_scheduler import start_test_client

    client = await start_test_client(create_app(GatewayConfig(scheduler_addr="direct", access_log=False),
                                                DirectClient(direct_fake())))
    base, rows = str(client.make_url("")).rstrip("/"), []
    print_header("process")
    try:
        for route in args.routes:
            for concurrency in args.levels:
                path, body = ROUTES[route][0], body_of(route, args.max_tokens)
                await load(base, path, body, concurrency, 0.3)
                cpu0, t0 = time.process_time(), time.monotonic()
                num = await load(base, path, body, concurrency, args.seconds)
                cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
                rows.append(level_row(route, concurrency, num, wall, cpu, args.max_tokens))
    finally:
        await client.close()
    return rows


def request_rows(base: str, pid: int, args) -> list:
    """Gateway CPU ms per request of the long chats over HTTP (max_tokens 1, C 1), beside their in-process parts."""
    rows = []
    print("| chat | prompt tokens | render ms | encode ms | gateway CPU ms/request (HTTP) |\n| --- | --- | --- | --- | --- |")
    for row in long_chat_rows():
        body = dict(row.pop("body"), max_tokens=1)
        num, _, cpu = measure(base, pid, "/v1/chat/completions", body, 1, args.seconds)
        row["http_cpu_ms"] = 1e3 * cpu / max(num, 1)
        rows.append(row)
        print(f"| {row['chat']} | {row['prompt_tokens']} | {row['render_ms']:.2f} | {row['encode_ms']:.2f} | "
              f"{row['http_cpu_ms']:.2f} |", flush=True)
    return rows


def start(args, out_dir: str) -> tuple:
    """(fake scheduler, gateway) processes, the gateway answering /health."""
    procs = []
    prof = [os.path.join(out_dir, "gateway_load.prof")] if args.profile else []
    log = open(os.path.join(out_dir, "gateway_load.log"), "w", encoding="utf-8")
    for argv in (["scheduler", str(args.grpc_port)],
                 ["gateway", str(args.port), f"127.0.0.1:{args.grpc_port}", *prof]):
        procs.append(subprocess.Popen([sys.executable, "-m", "bench.gateway_procs", *argv], cwd=REPO, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent))
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{args.port}/v1/models", timeout=2):
                return procs
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the gateway did not answer /v1/models in 60 s (see gateway_load.log)")


def write_outputs(out_dir: str, rows: list, title: str) -> None:
    write_csv(os.path.join(out_dir, "gateway_load.csv"), rows)
    plt = pyplot("gateway_load.png")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for route in dict.fromkeys(row["route"] for row in rows):
        mine = [row for row in rows if row["route"] == route]
        ax.plot([r["concurrency"] for r in mine], [r["tok_per_cpu_s"] for r in mine], marker="o", label=route)
    ax.set(xscale="log", xlabel="concurrent streams", ylabel="tokens per gateway CPU-second", title=title)
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.savefig(os.path.join(out_dir, "gateway_load.png"), dpi=110, bbox_inches="tight")


def print_side_by_side(rows: list) -> None:
    """Tokens per CPU-second, a row per route and a column per C."""
    levels = list(dict.fromkeys(row["concurrency"] for row in rows))
    print("| tok/cpu-s | " + " | ".join(f"C={c}" for c in levels) + " |\n|" + " --- |" * (len(levels) + 1))
    for route in dict.fromkeys(row["route"] for row in rows):
        mine = {row["concurrency"]: row["tok_per_cpu_s"] for row in rows if row["route"] == route}
        print(f"| {route} | " + " | ".join(f"{mine[c]:.0f}" if c in mine else "" for c in levels) + " |")


def print_profile(path: str, top: int = 25) -> None:
    stats = pstats.Stats(path)
    stats.sort_stats("tottime").print_stats(top)


def processes_rows(args, out_dir: str) -> list:
    """stream_rows and request_rows on a gateway and a fake scheduler of their own processes."""
    procs = start(args, out_dir)
    try:
        base, pid = f"http://127.0.0.1:{args.port}", procs[1].pid
        rows = stream_rows(base, pid, args)
        if not args.no_long_chats:
            request_rows(base, pid, args)
        return rows
    finally:
        kill(procs[1], signal.SIGINT, wait=30)
        kill(procs[0])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway_load", description=__doc__.splitlines()[0])
    parser.add_argument("--routes", default=",".join(ROUTES), help=f"comma-separated, of {', '.join(ROUTES)}")
    parser.add_argument("--concurrency", default="1,16,64,256", help="comma-separated C values")
    parser.add_argument("--max-tokens", type=int, default=256, help="tokens per request")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per level")
    parser.add_argument("--port", type=int, default=8390, help="the gateway's HTTP port")
    parser.add_argument("--grpc-port", type=int, default=8391, help="the fake scheduler's port")
    parser.add_argument("--no-long-chats", action="store_true", help="skip the per-request part")
    parser.add_argument("--profile", action="store_true", help="run the gateway under cProfile")
    parser.add_argument("--in-process", action="store_true",
                        help="gateway, clients and token source in this process (no gRPC, no long chats)")
    args = parser.parse_args(argv)
    args.routes = [r for r in args.routes.split(",") if r]
    args.levels = [int(c) for c in args.concurrency.split(",") if c]
    out_dir = output_dir()
    rows = asyncio.run(in_process_rows(args)) if args.in_process else processes_rows(args, out_dir)
    title = f"gateway CPU per streamed token, {args.max_tokens} tokens a request (bench/gateway_load.py)"
    print_side_by_side(rows)
    write_outputs(out_dir, rows, title)
    print(f"wrote {out_dir}/gateway_load.csv, .png")
    if args.profile and not args.in_process:
        print_profile(os.path.join(out_dir, "gateway_load.prof"))


if __name__ == "__main__":
    main()
