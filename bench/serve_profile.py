"""GPU bench: the served decode step's kernels against bench/gpu_model.py's, one CUDA-graph replay each, C = 1.

Loads a checkpoint as the worker does (worker.server.build_runner: NVFP4 repacked, projections fused), prefills one
PROMPT-token request and replays its decode graph; builds bench/gpu_model.py's random 27B-shaped model at the same
context; prints each replay's time (CUDA events: bench.cuda_timing.median_ms), its kernels by total time
(torch.profiler, per replay) and the kernels whose time differs most between the two. What a served step runs beyond the bench's model
(a projection left unfused, a dense Linear through cuBLAS) shows up as the difference.
Run (on the GPU machine): python3 -m bench.serve_profile [--model DIR] [--prompt 512]; without --model the 64-layer
27B-shaped NVFP4 checkpoint of bench/serve_ckpt.py is written to (or reused from) /tmp/ck27b.
"""
import argparse
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from bench import gpu_model
from bench.cuda_timing import median_ms
from bench.serve_ckpt import make_checkpoint
from proto import pb
from worker.server import WorkerConfig, build_runner

REPS = 5


def kernel_times(fn) -> dict:
    """{kernel name: [us per call of fn, launches per call]} over REPS calls of fn."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPS):
            fn()
        torch.cuda.synchronize()
    times = defaultdict(lambda: [0.0, 0])
    for evt in prof.key_averages():
        us = getattr(evt, "self_device_time_total", None) or getattr(evt, "self_cuda_time_total", 0)
        if us > 0:
            times[evt.key][0] += us / REPS
            times[evt.key][1] += evt.count // REPS
    return times


def served_replay(model_dir: str, prompt: int):
    """The served decode graph's replay after one PROMPT-token prefill (ModelRunner as the worker builds it)."""
    runner, hello = build_runner(WorkerConfig(model=model_dir, num_state_slots=8, kv_cache_mib=8192))
    blocks = list(range((prompt + 64) // hello.block_size + 2))
    step = pb.PackedStep(session_id="s", step_id=1)
    step.new_requests.add(req_id="r", sampling=pb.SamplingParams(), prompt_token_ids=list(range(100, 100 + prompt)))
    step.rows.add(req_id="r", num_tokens=prompt, context_len=0, state_slot=0, block_table=blocks, sample=True)
    step.token_ids.extend(range(100, 100 + prompt))
    first = runner.execute(step)
    step = pb.PackedStep(session_id="s", step_id=2)
    step.rows.add(req_id="r", num_tokens=1, context_len=prompt, state_slot=0, block_table=blocks, sample=True)
    step.token_ids.append(first.token_ids[0])
    batch = runner.build_batch(step)
    runner.graphs.forward(batch, [prompt])
    return runner.graphs.graphs[runner.graphs.key(1, prompt)][0].replay


def bench_replay(prompt: int):
    """bench/gpu_model.py's model (64 layers, f32 GDN state) at context PROMPT, one decode row, as a graph."""
    gpu_model.CTX = prompt
    config = gpu_model.config_27b(64)
    model, _ = gpu_model.build(config)
    cache = gpu_model.make_cache(config, torch.float32)
    batch = gpu_model.decode_batch(1, cache, config.vocab_size)
    step, last = model.prepare(batch, gpu_model.BLOCK), batch.last_token_index()
    model.run(step, cache, last)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model.run(step, cache, last)
    return graph.replay


def show(label: str, replay_ms: float, times: dict, top: int = 12) -> None:
    total = sum(us for us, _ in times.values())
    print(f"== {label}: replay {replay_ms:.3f} ms, {total / 1e3:.3f} ms of kernel time, "
          f"{sum(n for _, n in times.values())} kernels")
    for name, (us, count) in sorted(times.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {us:9.1f} us x{count:<4} {name[:100]}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m bench.serve_profile")
    parser.add_argument("--model", help="checkpoint folder (default: the 27B-shaped one, written if missing)")
    parser.add_argument("--prompt", type=int, default=512)
    args = parser.parse_args(argv)
    served = served_replay(args.model or make_checkpoint("/tmp/ck27b", "27b", 64), args.prompt)
    served_times = kernel_times(served)
    show("served", median_ms(served), served_times)
    bench = bench_replay(args.prompt)
    bench_times = kernel_times(bench)
    show("bench/gpu_model", median_ms(bench), bench_times)
    names = sorted(set(served_times) | set(bench_times),
                   key=lambda n: -abs(served_times.get(n, [0, 0])[0] - bench_times.get(n, [0, 0])[0]))
    print("== largest differences, served - bench (us per replay)")
    for name in names[:12]:
        (a, na), (b, nb) = served_times.get(name, [0.0, 0]), bench_times.get(name, [0.0, 0])
        print(f"  {a - b:+9.1f}  served {a:8.1f} x{na:<4} bench {b:8.1f} x{nb:<4} {name[:80]}")


if __name__ == "__main__":
    main()
