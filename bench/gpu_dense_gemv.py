"""GPU bench (device machine): the skinny bf16 GEMV (kernels/dense/gemv.cu) against torch's F.linear (cuBLAS) on
the same weights, timed as bench/gpu_nvfp4.py times (GPU held by a sleep kernel, batches of 10 back-to-back
launches on rotating weight copies that exceed the L2).

Shapes: the 27B GDN gates [b; a] (96 x 5120, what the served step runs through it), and wider ones to show where
the kernel stops paying (dispatch: kernels/dense/ops.MAX_WEIGHT_NUMEL). Columns per M = 1, 2, 4, 8: ours (PDL),
ours_plain (no PDL), torch; each us and % of the copy bandwidth measured in the same run (weights + x read).
Checks every shape and M first: rel err < 1e-2 against an f32 matmul, output NaN-poisoned. Writes
$OUT/gpu_dense_gemv.csv and .png when OUT is set.
"""
import math
import os
import sys

import torch

from bench.gpu_nvfp4 import L2_BYTES, copy_bandwidth, timed
from bench.output import write_csv
from bench.plotting import pyplot
from kernels.dense import ops

SHAPES = [(96, 5120), (97, 2048), (1024, 5120), (6144, 5120), (17408, 5120), (5120, 8192)]
ROWS = (1, 2, 4, 8)


def check(n: int, k: int) -> float:
    """Worst relative error over ROWS of ops.gemv against x.float() @ w.float().T (fresh random inputs)."""
    w = (torch.randn(n, k, device="cuda") / math.sqrt(k)).to(torch.bfloat16)
    worst = 0.0
    for m in ROWS:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        ops.gemv(x, w, out)
        ref = x.float() @ w.float().t()
        err = float("inf") if out.isnan().any() else ((out.float() - ref).norm() / ref.norm()).item()
        worst = max(worst, err)
    return worst


def cells(n: int, k: int, m: int, weights) -> dict:
    """Median seconds per launch: ours with and without PDL, torch F.linear."""
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    ours = [lambda w=w: ops.gemv(x, w, out) for w in weights]
    res = {"ours": timed(ours, 20, 10)}
    ops.PDL = False
    res["ours_plain"] = timed(ours, 20, 10)
    ops.PDL = True
    res["torch"] = timed([lambda w=w: torch.nn.functional.linear(x, w) for w in weights], 20, 10)
    return res


def save(rows) -> None:
    out_dir = os.environ.get("OUT")
    if not out_dir:
        return
    write_csv(os.path.join(out_dir, "gpu_dense_gemv.csv"), rows)
    plt = pyplot()
    if plt is None:
        return
    try:
        fig, ax = plt.subplots(figsize=(10, 4))
        labels = [f"{r['n']}x{r['k']} M={r['m']}" for r in rows]
        xs = range(len(rows))
        ax.bar([x - 0.2 for x in xs], [r["ours_us"] for r in rows], 0.4, label="ours (PDL)")
        ax.bar([x + 0.2 for x in xs], [r["torch_us"] for r in rows], 0.4, label="torch F.linear (cuBLAS)")
        ax.set_xticks(list(xs), labels, rotation=60, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("us per launch (median)")
        ax.set_title("skinny bf16 GEMV, H200")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "gpu_dense_gemv.png"), dpi=120)
    except Exception as exc:  # noqa: BLE001 - the plot is optional
        print(f"(plot skipped: {exc})")


def main() -> int:
    copy_bw = copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s")
    failed, rows = 0, []
    print(f"{'shape':>12s} {'M':>2s} {'ours us':>8s} {'plain us':>9s} {'torch us':>9s} {'torch/ours':>10s} "
          f"{'%copy':>6s}")
    for n, k in SHAPES:
        err = check(n, k)
        failed += not err < 1e-2
        print(f"check {n}x{k}: rel err {err:.2e} {'PASS' if err < 1e-2 else 'FAIL'}", flush=True)
        copies = max(1, math.ceil(3 * L2_BYTES / (2 * n * k)))
        weights = [(torch.randn(n, k, device="cuda") / math.sqrt(k)).to(torch.bfloat16) for _ in range(copies)]
        for m in ROWS:
            c = cells(n, k, m, weights)
            frac = 2 * (n + m) * k / c["ours"] / copy_bw
            rows.append({"n": n, "k": k, "m": m, "ours_us": c["ours"] * 1e6, "ours_plain_us": c["ours_plain"] * 1e6,
                         "torch_us": c["torch"] * 1e6, "ours_frac_copy": frac})
            print(f"{n:>6d}x{k:<5d} {m:2d} {c['ours'] * 1e6:8.2f} {c['ours_plain'] * 1e6:9.2f} "
                  f"{c['torch'] * 1e6:9.2f} {c['torch'] / c['ours']:10.2f} {100 * frac:6.1f}", flush=True)
        del weights
        torch.cuda.empty_cache()
    save(rows)
    print("correctness:", "PASS" if not failed else f"FAIL ({failed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
