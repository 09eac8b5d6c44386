"""Bench (its own process, plus the stack's scheduler, worker and gateway): served tokens/s, TTFT and ITL of the whole
stack over HTTP, in the manner of vLLM's benchmarks/benchmark_serving.py (metric definitions: bench/serve_metrics.py).

Makes the checkpoint (--model DIR, or a random one of --shape tiny | 27b written by bench/serve_ckpt.py), starts the
stack as `make run` does on free ports (bench/serve_stack.py), then for each concurrency C sends --num-prompts
streamed /v1/completions requests (distinct random token-id prompts of --input-len, --output-len tokens each, greedy,
ignore_eos, usage in the last chunk) with C in flight, after a warm-up of C such requests that is not counted. Prints
a row per C and writes serve_http.csv, serve_http.png and the stack's log to $OUT (else bench/out). After the last C
it checks that the scheduler's running / waiting gauges are back to 0, then stops every process it started (so does
Ctrl-C, SIGTERM or an error).
Exit code: 0; 1 when the stack failed, a request failed or a gauge stayed above 0; 2 when a module the stack needs is
missing (checked first). The KV pool is sized for the workload (kv_cache_mib).
Run: python -m bench.serve_http --shape 27b --layers 64 --concurrency 1,8,32,64 --input-len 512 --output-len 128
"""
import argparse
import asyncio
import importlib.util
import json
import math
import os
import random
import signal
import sys
import tempfile
import time

import aiohttp
import torch
from tokenizers import Tokenizer

from bench import serve_metrics
from bench.output import output_dir, write_csv
from bench.serve_ckpt import QUANTS, SHAPES, linear_weight_bytes, make_checkpoint
from worker.config import ModelConfig

# Modules the stack's processes import beyond the standard library and torch (the GPU machine's image lacks some);
# checked before bench.serve_stack is imported, which needs grpc itself.
STACK_MODULES = ("aiohttp", "grpc", "grpc_health", "grpc_tools", "google.protobuf", "zmq", "orjson", "jsonschema",
                 "referencing", "jsonschema_specifications", "rpds", "llguidance", "prometheus_client", "tokenizers",
                 "jinja2", "safetensors", "tqdm")
STATE_SIZES = {"float32": 4, "bfloat16": 2}
GAUGE_WAIT_S = 10.0
BLOCK_SIZE = 16  # the worker's default KV block (SPARKINFER_BLOCK_SIZE)
T0 = time.monotonic()


def stamp() -> str:
    return f"[{time.monotonic() - T0:.0f} s]"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.serve_http", description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="serve this checkpoint folder (else one of --shape is written)")
    parser.add_argument("--shape", choices=SHAPES, default="tiny", help="random-weight checkpoint to write")
    parser.add_argument("--layers", type=int, default=64, help="27b: keep the first N of its 64 layers")
    parser.add_argument("--quant", choices=QUANTS, default="nvfp4", help="Linear weights of the written checkpoint")
    parser.add_argument("--shrink", type=int, default=1, help="27b: divide the hidden and MLP widths (CPU checks)")
    parser.add_argument("--model-dir", help="where to write it (default: a folder under the temp dir, reused)")
    parser.add_argument("--concurrency", default="1,8,32,64", help="comma-separated C values")
    parser.add_argument("--num-prompts", type=int, default=0, help="requests per C (default max(2 C, 8))")
    parser.add_argument("--input-len", type=int, default=512, help="prompt tokens")
    parser.add_argument("--output-len", type=int, default=128, help="max_tokens (ignore_eos: always reached)")
    parser.add_argument("--bandwidth-gbs", type=float, default=0.0,
                        help="GB/s for the roofline (default: measured on CUDA, none on CPU)")
    parser.add_argument("--no-warmup", action="store_true", help="skip the uncounted warm-up at each C")
    parser.add_argument("--start-timeout", type=float, default=600.0, help="seconds to wait for /v1/models")
    args = parser.parse_args(argv)
    args.levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    if not args.levels or min(args.levels) < 1 or args.input_len < 1 or args.output_len < 1:
        parser.error("--concurrency values, --input-len and --output-len must be >= 1")
    return args


def missing_modules() -> list:
    """The STACK_MODULES this interpreter cannot import."""
    missing = []
    for name in STACK_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(name)
    return missing


def model_folder(args) -> str:
    if args.model:
        return args.model
    name = args.shape + (f"-L{args.layers}" + (f"-s{args.shrink}" if args.shrink > 1 else "")
                         if args.shape == "27b" else "") + f"-{args.quant}"
    out = args.model_dir or os.path.join(tempfile.gettempdir(), "sparkinfer-bench", name)
    return make_checkpoint(out, args.shape, args.layers, args.quant, args.shrink)


def worker_device() -> str:
    """The device the worker picks (worker/server.py: SPARKINFER_DEVICE, else cuda:0 when CUDA is present)."""
    return os.environ.get("SPARKINFER_DEVICE") or ("cuda:0" if torch.cuda.is_available() else "cpu")


def bandwidth(args):
    """Bytes/s for the roofline: --bandwidth-gbs, else a 1 GiB device-to-device copy on CUDA, else None."""
    if args.bandwidth_gbs > 0:
        return args.bandwidth_gbs * 1e9
    if not worker_device().startswith("cuda"):
        return None
    from bench.gpu_model import copy_bandwidth

    measured = copy_bandwidth()
    torch.cuda.empty_cache()
    print(f"copy bandwidth (1 GiB device-to-device, read + write): {measured / 1e9:.0f} GB/s", flush=True)
    return measured


def make_prompts(folder: str, count: int, length: int, seed: int) -> list:
    """count distinct prompts of `length` token ids drawn from the tokenizer's trained tokens (no special ones)."""
    vocab = Tokenizer.from_file(os.path.join(folder, "tokenizer.json")).get_vocab_size(with_added_tokens=False)
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(length)] for _ in range(count)]


async def one_request(session: aiohttp.ClientSession, url: str, body: dict) -> serve_metrics.RequestResult:
    """One streamed completion: when each text chunk arrived and the usage's completion_tokens."""
    result = serve_metrics.RequestResult(ok=False, start=time.perf_counter(), end=0.0)
    async with session.post(url, json=body) as resp:
        if resp.status != 200:
            result.error = f"HTTP {resp.status}: {(await resp.text())[:300]}"
        async for raw in resp.content:
            line = raw.strip()
            if resp.status != 200 or not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                result.ok = not result.error
                break
            event = json.loads(data)
            if "error" in event:
                result.error = json.dumps(event["error"])[:300]
            if any(choice.get("text") for choice in event.get("choices") or ()):
                result.chunk_times.append(time.perf_counter())
            if event.get("usage"):
                result.output_tokens = event["usage"]["completion_tokens"]
    result.end = time.perf_counter()
    return result


async def run_level(base: str, served: str, prompts: list, concurrency: int, output_len: int):
    """Sends every prompt with at most `concurrency` in flight; -> (results, wall seconds)."""
    limit = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:
        async def limited(prompt):
            body = {"model": served, "prompt": prompt, "max_tokens": output_len, "temperature": 0,
                    "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            async with limit:
                return await one_request(session, base + "/v1/completions", body)

        start = time.perf_counter()
        results = await asyncio.gather(*(limited(p) for p in prompts))
        return results, time.perf_counter() - start


def bench_level(stack, folder: str, args, concurrency: int) -> dict:
    count = args.num_prompts or max(2 * concurrency, 8)
    if not args.no_warmup:
        warm = make_prompts(folder, concurrency, args.input_len, seed=-concurrency)
        asyncio.run(run_level(stack.base, stack.served, warm, concurrency, args.output_len))
    prompts = make_prompts(folder, count, args.input_len, seed=concurrency)
    results, wall = asyncio.run(run_level(stack.base, stack.served, prompts, concurrency, args.output_len))
    for failure in [r for r in results if not r.ok][:3]:
        print(f"  failed request at C={concurrency}: {failure.error}", flush=True)
    return serve_metrics.summarize(concurrency, results, wall)


def kv_cache_mib(config: ModelConfig, args) -> int:
    """KV pool for the workload: twice what max(C) sequences of input + output tokens take (f32 K and V, a spare
    block each), at least the CPU default of 128 MiB. The worker's own CUDA default (85% of the memory left after the
    weights) leaves too little for the NVFP4 repack that the first step makes, a second copy of the Linear weights
    (kernels/nvfp4/repack.prepared); SPARKINFER_KV_CACHE_MIB overrides."""
    per_token = len(config.attention_layer_ids) * 2 * config.num_key_value_heads * config.head_dim * 4
    tokens = max(args.levels) * (args.input_len + args.output_len + 2 * BLOCK_SIZE)
    return max(128, math.ceil(2 * tokens * per_token / 2**20))


def settled_gauges(stack) -> dict:
    """The scheduler's running / waiting gauges, polled until both read 0 or GAUGE_WAIT_S passed."""
    deadline = time.monotonic() + GAUGE_WAIT_S
    while True:
        gauges = stack.gauges()
        if all(v == 0 for v in gauges.values()) or time.monotonic() > deadline:
            return gauges
        time.sleep(0.2)


def serve_and_measure(folder: str, args, bw, out_dir: str):
    """Starts the stack, runs every level; -> (rows, gauges at the end)."""
    from bench.serve_stack import ServeStack

    config = ModelConfig.from_file(folder)
    weights = linear_weight_bytes(folder, config)
    state_size = STATE_SIZES[os.environ.get("SPARKINFER_GDN_STATE_DTYPE", "float32")]
    context = args.input_len + args.output_len // 2
    env = {"SPARKINFER_MAX_NUM_SEQS": str(max(args.levels)),
           "SPARKINFER_NUM_STATE_SLOTS": str(max(64, max(args.levels))),
           "SPARKINFER_KV_CACHE_MIB": str(kv_cache_mib(config, args))}
    env = {k: v for k, v in env.items() if k not in os.environ}
    rows = []
    with ServeStack(folder, env, os.path.join(out_dir, "serve_http_stack.log"), args.start_timeout) as stack:
        print(f"{stamp()} stack up at {stack.base} serving {stack.served!r}; "
              f"{stack.log_line('worker ready') or 'worker line not found'}", flush=True)
        for concurrency in args.levels:
            row = bench_level(stack, folder, args, concurrency)
            rows.append(serve_metrics.add_roofline(row, config, weights, state_size, context, bw))
            print(serve_metrics.format_table([row]).splitlines()[-1] + f"  {stamp()}", flush=True)
        gauges = settled_gauges(stack)
    return rows, gauges


def main(argv=None) -> int:
    args = parse_args(argv)
    # SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the stack is stopped on the way out
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return run(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args) -> int:
    missing = missing_modules()
    if missing:
        print(f"{sys.executable} cannot import {', '.join(missing)}, which the stack needs (install them, or carry "
              f"their wheels to this machine)", file=sys.stderr)
        return 2
    print(f"worker device: {worker_device()} (torch {torch.__version__}, CUDA "
          f"{'available' if torch.cuda.is_available() else 'not available'})", flush=True)
    out_dir = output_dir()
    folder = model_folder(args)
    bw = bandwidth(args)
    load = os.getloadavg()[0]
    print(f"{stamp()} checkpoint {folder}; starting the stack\n{serve_metrics.format_table([])}", flush=True)
    try:
        rows, gauges = serve_and_measure(folder, args, bw, out_dir)
    except RuntimeError as exc:
        print(f"{stamp()} the stack failed: {exc}", file=sys.stderr)
        return 1
    title = (f"{os.path.basename(folder.rstrip('/'))} on {worker_device()}: {args.input_len} -> {args.output_len} "
             f"tokens, greedy, ignore_eos" + (f"; roofline at {bw / 1e9:.0f} GB/s" if bw else ""))
    print(f"\n{title}; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs)\n"
          f"{serve_metrics.format_table(rows)}")
    write_csv(os.path.join(out_dir, "serve_http.csv"), rows)
    serve_metrics.write_png(os.path.join(out_dir, "serve_http.png"), rows, title)
    print(f"{stamp()} scheduler gauges after the run: {gauges}; wrote {out_dir}/serve_http.csv, .png, _stack.log")
    bad = sum(r["failed"] for r in rows) or any(v != 0 for v in gauges.values()) or len(gauges) < 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
