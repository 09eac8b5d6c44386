"""CUDA timing helpers of the GPU benches (bench/gpu_gdn.py and the benches that time as it does): medians of
CUDA-event timings, CUDA-graph replays of a list of launches, the device-to-device copy bandwidth."""
import statistics

import torch


def median_ms(fn, warmup=3, reps=10) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def graph_us(calls) -> tuple:
    """Median per-call time (us) of a list of zero-argument launches, captured once as a CUDA graph and
    replayed; falls back to an event-timed loop (includes launch overhead). Returns (us, method)."""
    def loop():
        for c in calls:
            c()
    loop()
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            loop()
        return median_ms(graph.replay, reps=20) * 1e3 / len(calls), "graph"
    except Exception as exc:  # noqa: BLE001 - report and fall back
        print(f"  (graph capture failed: {type(exc).__name__}: {exc}; timing an eager loop)")
        torch.cuda.synchronize()
        return median_ms(loop, reps=30) * 1e3 / len(calls), "eager"


def copy_bandwidth() -> float:
    """Device-to-device copy GB/s, counting bytes read plus written (1 GiB buffer)."""
    src = torch.randn(2 ** 28, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), reps=20)
    return 2 * src.numel() * 4 / ms / 1e6


def guarded(fn, name):
    """fn() or NaN (printing the error) so that a failing reference never hides our numbers."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the bench must go on
        print(f"  ({name} failed: {type(exc).__name__}: {str(exc)[:300]})")
        return float("nan")
