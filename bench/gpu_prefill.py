"""GPU bench: prefill and mixed steps of the 27B shape, eager (model.forward) against the piecewise CUDA graphs
(worker/prefill_graphs.py), side by side in one run, with the step's kernel time as the floor.

`python3 -m bench.gpu_prefill` (bench.gpu_model's random NVFP4 27B-shaped model, GPU_MODEL_LAYERS layers, default 64).
Per case: the host time until the step's launches are issued and the wall time until the device is done (median of
ROUNDS), eager and pieces, the kernel time (torch.profiler, eager), and the relative difference of the two logits
(fresh prompts). The eager step is host-bound where its host time reaches its wall time. CSV + PNG to $OUT when set.
"""
import os
import time

import torch

import bench.gpu_model as gm
from bench.output import write_csv
from bench.plotting import pyplot
from worker.batch import ForwardBatch
from worker.prefill_graphs import PrefillGraphs

ROUNDS = 5
# (name, prompt lengths, rows of them that decode one token after 200 tokens of context)
CASES = [("16 tokens", [16], 0), ("7 decode + 4", [1] * 7 + [4], 7), ("40 tokens", [40], 0), ("128 tokens", [128], 0), ("512 tokens", [512], 0), ("1024 tokens", [1024], 0),
         ("300 + 200 tokens", [300, 200], 0), ("7 decode + 512", [1] * 7 + [512], 7)]


def batch_for(config, lens: list, decode_rows: int) -> ForwardBatch:
    """Rows of `lens` tokens on slots 0.. and consecutive blocks; the first decode_rows rows have 200 of context."""
    gen = torch.Generator().manual_seed(sum(lens))
    rows, first = [], 0
    for i, n in enumerate(lens):
        ctx = 200 if i < decode_rows else 0
        blocks = -(-(n + ctx) // gm.BLOCK)
        rows.append((torch.randint(0, config.vocab_size, (n,), generator=gen).tolist(), ctx, i,
                     list(range(first, first + blocks)), True))
        first += blocks
    return ForwardBatch.from_rows(rows, gm.BLOCK).to(gm.DEVICE)


def timed(step) -> tuple:
    """Median (host ms, done ms) of ROUNDS calls of step, each started on an idle device."""
    host, done = [], []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        host.append(1e3 * (t1 - t0))
        done.append(1e3 * (time.perf_counter() - t0))
    return sorted(host)[ROUNDS // 2], sorted(done)[ROUNDS // 2]


def kernel_ms(step) -> float:
    """The device time of one call of step's kernels (torch.profiler), ms."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(getattr(e, "self_device_time_total", 0) for e in prof.key_averages()) / 1e3


def run_case(model, cache, pieces, name: str, lens: list, decode_rows: int) -> dict:
    batch = batch_for(model.config, lens, decode_rows)
    eager, graphed = (lambda: model.forward(batch, cache)), (lambda: pieces.forward(batch))
    for step in (eager, eager, graphed, graphed):  # compile, capture, warm
        step()
    row = {"case": name, "tokens": sum(lens), "kernel_ms": round(kernel_ms(eager), 2)}
    for label, step in (("eager", eager), ("pieces", graphed)):
        row[f"{label}_host_ms"], row[f"{label}_ms"] = (round(v, 2) for v in timed(step))
    if not decode_rows:  # fresh rows: both read the same state
        want, got = eager().float(), graphed().float()
        row["logits_rel"] = f"{((got - want).norm() / want.norm()).item():.1e}"
    return row


def main() -> None:
    config = gm.config_27b(int(os.environ.get("GPU_MODEL_LAYERS", gm.LAYERS)))
    model, _ = gm.build(config)
    cache = gm.make_cache(config, torch.float32)
    pieces = PrefillGraphs.create(model, cache, on=True, verbose=False)
    print(f"27B shape, {config.num_hidden_layers} layers; ms, median of {ROUNDS}; host = launches issued, "
          "wall = device done")
    print("| case | tokens | kernels ms | eager host | eager wall | pieces host | pieces wall | eager / pieces "
          "| logits rel |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    for case in CASES:
        r = run_case(model, cache, pieces, *case)
        rows.append(r)
        print(f"| {r['case']} | {r['tokens']} | {r['kernel_ms']} | {r['eager_host_ms']} | {r['eager_ms']} | "
              f"{r['pieces_host_ms']} | {r['pieces_ms']} | {r['eager_ms'] / r['pieces_ms']:.2f} | "
              f"{r.get('logits_rel', '-')} |", flush=True)
    save(rows)


def save(rows: list) -> None:
    out_dir = os.environ.get("OUT")
    if not out_dir:
        return
    write_csv(os.path.join(out_dir, "gpu_prefill.csv"), rows)
    plt = pyplot("prefill plot")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    xs = range(len(rows))
    for off, key, label in ((-0.27, "eager_ms", "eager"), (0.0, "pieces_ms", "piecewise graphs"),
                            (0.27, "kernel_ms", "kernel time (floor)")):
        ax.bar([x + off for x in xs], [r[key] for r in rows], 0.27, label=label)
    ax.set_xticks(list(xs), [r["case"] for r in rows], rotation=20, ha="right")
    ax.set_ylabel("step wall time, ms")
    ax.set_title("Prefill / mixed step, 27B shape (NVFP4), H200")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "gpu_prefill.png"), dpi=120)


if __name__ == "__main__":
    main()
