"""GPU bench (device machine): one sampling step of M rows over the 27B vocabulary (V = 248320) at Qwen's default
sampling (temperature 0.7, top_p 0.8, top_k 20), with the logits on the GPU (the worker now) against the same
sampler on the host (the worker before: logits copied to the host first; all the host's threads), side by side.
Prints ms per step (median of 5 after a warm-up) and the GPU forward step it sits beside."""
import statistics
import time

import torch

from proto import pb
from worker.sampler import Sampler, SamplingState

V = 248320


def step_ms(sampler: Sampler, logits: torch.Tensor, states: list, host: bool) -> float:
    times = []
    for _ in range(6):
        torch.cuda.synchronize()
        t = time.perf_counter()
        sampler.sample(logits.cpu() if host else logits, states)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times[1:]) * 1e3


def main() -> None:
    print(f"host threads {torch.get_num_threads()}")
    print(f"{'M':>4} {'gpu ms':>8} {'host ms':>8} {'ratio':>6}")
    for m in (1, 8, 32, 64):
        states = [SamplingState(str(i), pb.SamplingParams(temperature=0.7, top_p=0.8, top_k=20), [1, 2, 3], [4])
                  for i in range(m)]
        logits = torch.randn(m, V, device="cuda") * 3
        gpu, host = step_ms(Sampler(V, seed=1), logits, states, False), step_ms(Sampler(V, seed=1), logits, states, True)
        print(f"{m:>4} {gpu:8.2f} {host:8.2f} {host / gpu:6.1f}", flush=True)


if __name__ == "__main__":
    main()
