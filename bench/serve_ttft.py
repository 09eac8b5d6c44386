"""Bench: where a served C = 1 TTFT goes, by prompt length: the client's first streamed chunk against the scheduler's
own histograms (arrival to first token, queue time, prefill time: first scheduled to first token).

Runs the whole stack as bench/serve_http.py does (bench/serve_stack.py) on a checkpoint folder (written by
bench/serve_ckpt.py when --shape is given), then for each prompt length sends --requests streamed /v1/completions one
after another (greedy, eos ignored, a warm-up pair first) and prints per length: the client's median time to the first
chunk with text and to the end (ms), and the means of the scheduler's histograms over those requests (the difference
of their _sum / _count before and after, from its /metrics). Session 27 (worker/GPU_NOTES.md) used it to find that
a 16-token prompt spent ~95 ms in an eager prefill step.
Run: python3 -m bench.serve_ttft --shape 27b --layers 64 --model-dir /tmp/ck27b [--lens 16,128,512,2048]
"""
import argparse
import asyncio
import statistics
import urllib.request

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

HISTOGRAMS = ("sparkinfer_time_to_first_token_seconds", "sparkinfer_request_queue_time_seconds",
              "sparkinfer_request_prefill_time_seconds")


def histogram_sums(metrics_text: str) -> dict:
    """{series_sum / series_count: value} of HISTOGRAMS in a Prometheus text page (summed over label sets)."""
    out = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if any(sample.name in (h + "_sum", h + "_count") for h in HISTOGRAMS):
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


def histogram_means_ms(before: dict, after: dict) -> dict:
    """Mean of each histogram over the observations between two histogram_sums, in ms (None without any)."""
    means = {}
    for name in HISTOGRAMS:
        count = after.get(name + "_count", 0.0) - before.get(name + "_count", 0.0)
        total = after.get(name + "_sum", 0.0) - before.get(name + "_sum", 0.0)
        means[name] = 1e3 * total / count if count > 0 else None
    return means


async def sequential(base: str, served: str, prompts: list, max_tokens: int) -> list:
    """(seconds to the first chunk with text or None, seconds to the end) of each prompt's streamed completion, one
    after another (bench/serve_http.py's one_request)."""
    from bench.serve_http import one_request

    async with aiohttp.ClientSession() as session:
        body = {"model": served, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True}
        results = [await one_request(session, base + "/v1/completions", {**body, "prompt": p}) for p in prompts]
    return [(r.chunk_times[0] - r.start if r.chunk_times else None, r.end - r.start) for r in results]


def measure(stack, folder: str, length: int, args) -> dict:
    from bench.serve_http import make_prompts

    asyncio.run(sequential(stack.base, stack.served, make_prompts(folder, 2, length, seed=-length), args.max_tokens))
    read = lambda: histogram_sums(urllib.request.urlopen(stack.metrics_url, timeout=5).read().decode())  # noqa: E731
    before = read()
    results = asyncio.run(sequential(stack.base, stack.served, make_prompts(folder, args.requests, length, length),
                                     args.max_tokens))
    row = {"tokens": length, "ttft_ms": 1e3 * statistics.median(r[0] for r in results if r[0] is not None),
           "e2e_ms": 1e3 * statistics.median(r[1] for r in results)}
    row.update({k.replace("sparkinfer_", "").replace("_seconds", ""): v
                for k, v in histogram_means_ms(before, read()).items()})
    return row


def main(argv=None) -> None:
    from bench.serve_ckpt import make_checkpoint
    from bench.serve_stack import ServeStack

    parser = argparse.ArgumentParser(prog="python -m bench.serve_ttft", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, help="checkpoint folder (written there when --shape is given)")
    parser.add_argument("--shape", choices=("tiny", "27b"), help="random-weight checkpoint to write (bench.serve_ckpt)")
    parser.add_argument("--layers", type=int, default=64, help="27b: keep the first N layers")
    parser.add_argument("--lens", default="16,128,512,2048", help="comma-separated prompt lengths in tokens")
    parser.add_argument("--requests", type=int, default=8, help="requests per length")
    parser.add_argument("--max-tokens", type=int, default=8, help="tokens each request generates")
    args = parser.parse_args(argv)
    if args.shape:
        make_checkpoint(args.model_dir, args.shape, args.layers)
    with ServeStack(args.model_dir, {}, "/tmp/serve_ttft_stack.log") as stack:
        print("| prompt tokens | client TTFT med ms | E2E med ms | sched TTFT mean ms | queue mean ms "
              "| prefill mean ms |")
        print("| --- | --- | --- | --- | --- | --- |")
        for length in (int(x) for x in args.lens.split(",")):
            r = measure(stack, args.model_dir, length, args)
            cells = [r["time_to_first_token"], r["request_queue_time"], r["request_prefill_time"]]
            print(f"| {length} | {r['ttft_ms']:.1f} | {r['e2e_ms']:.1f} | "
                  + " | ".join("-" if c is None else f"{c:.1f}" for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
