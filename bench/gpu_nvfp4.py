"""GPU bench (device machine): NVFP4 kernels checked, then timed against torch/cuBLAS bf16 on the same logical shapes.

Prints copy bandwidth, PASS/FAIL per correctness case, then per shape [N x K] and M: our time, bf16 time, ratio, and for
M <= 16 the effective bandwidth (packed codes + scales / time) as a fraction of the copy bandwidth. Timing: CUDA events
around each launch while the GPU is held by a sleep kernel (so host launch cost stays out), warm-up, median; weights
rotate among copies that together exceed the L2 several times. With OUT set, writes nvfp4.csv and nvfp4.png there.
"""
import csv
import math
import os
import statistics
import sys

import torch

from kernels.nvfp4 import checkpoint, naive, ops

SHAPES = [(10240, 5120), (6144, 5120), (5120, 6144), (17408, 5120), (5120, 17408), (12288, 5120), (248320, 5120)]
M_VALUES = [1, 2, 4, 8, 16, 32, 128, 512, 2048, 8192]
CHECK_M = [1, 5, 16, 32, 33, 512]
L2_BYTES = 60 << 20
SLEEP_CYCLES = 20_000_000  # ~10 ms at 2 GHz: long enough for the host to queue every timed launch


def timed(fns, reps: int) -> float:
    """fns: callables launching one kernel each (rotated) -> median seconds per launch (events between launches)."""
    for fn in fns[:3]:
        fn()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    torch.cuda._sleep(SLEEP_CYCLES)
    for i in range(reps):
        events[i].record()
        fns[i % len(fns)]()
    events[reps].record()
    torch.cuda.synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) for i in range(reps)) * 1e-3


def copy_bandwidth() -> float:
    """Device-to-device copy of 4 GiB: (bytes read + written) / median time, bytes/s."""
    a = torch.randint(0, 255, (4 << 30,), dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    t = timed([lambda: b.copy_(a)], 10)
    del a, b
    return 2 * (4 << 30) / t


def check(n: int, k: int) -> list:
    """-> [(m, rel err, PASS/FAIL)] for a real quantized random weight against dequantize + f32 matmul."""
    w = torch.randn(n, k, device="cuda") * (0.5 + torch.rand(n, 1, device="cuda"))
    weight = checkpoint.from_tensors(naive.quantize(w, "modelopt"))
    del w
    ref_w, p, rows = weight.dequantize(), ops.prepared(weight), []
    for m in CHECK_M:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        (ops.gemv if m <= ops.GEMV_MAX_M else ops.gemm)(x, p, out)
        ref = x.float() @ ref_w.t()
        err = ((out.float() - ref).norm() / ref.norm()).item()
        ok = not torch.isnan(out).any().item() and err < 1e-2
        rows.append((m, err, "PASS" if ok else "FAIL"))
    return rows


def fake_prepared(n: int, k: int) -> dict:
    """A repacked weight of random codes and sane scales (values do not change the time, zeros are avoided)."""
    np_, kc = -(-n // 128) * 128, -(-k // 64)
    wq = torch.randint(0, 256, (np_ // 16, kc, 32, 16), dtype=torch.uint8, device="cuda")
    wsc = torch.randint(0x30, 0x50, (np_ // 16, kc, 32, 2), dtype=torch.uint8, device="cuda")
    return {"wq": wq, "wsc": wsc, "alpha": 1e-3 * 2.0 ** 62, "N": n, "K": k, "Np": np_, "Kc": kc}


def reps_for(seconds: float) -> int:
    return int(min(50, max(5, 0.25 / max(seconds, 1e-6))))


def bench_shape(n: int, k: int) -> list:
    nv_bytes, bf_bytes = n * k // 2 + n * k // 16, n * k * 2
    nv = [fake_prepared(n, k) for _ in range(min(16, max(1, math.ceil(3 * L2_BYTES / nv_bytes))))]
    bf = [torch.randn(n, k, device="cuda").to(torch.bfloat16) for _ in range(min(8, max(1, math.ceil(3 * L2_BYTES / bf_bytes))))]
    rows = []
    for m in M_VALUES:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        kern = ops.gemv if m <= ops.GEMV_MAX_M else ops.gemm
        ours = [lambda p=p: kern(x, p, out) for p in nv]
        ref = [lambda w=w: torch.mm(x, w.t(), out=out) for w in bf]
        t_ours = timed(ours, reps_for(timed(ours, 3)))
        t_bf16 = timed(ref, reps_for(timed(ref, 3)))
        rows.append({"N": n, "K": k, "M": m, "ours_us": t_ours * 1e6, "bf16_us": t_bf16 * 1e6,
                     "ratio": t_bf16 / t_ours, "nvfp4_bytes": nv_bytes, "ours_tflops": 2 * m * n * k / t_ours / 1e12,
                     "bf16_tflops": 2 * m * n * k / t_bf16 / 1e12, "ours_bw": nv_bytes / t_ours,
                     "bf16_bw": bf_bytes / t_bf16})
        del x, out
    del nv, bf
    torch.cuda.empty_cache()
    return rows


def launch_floor() -> float:
    """Back-to-back time of our GEMV on a 128 x 64 weight: the per-launch floor (launch + one tiny block)."""
    p = fake_prepared(128, 64)
    x = torch.randn(1, 64, device="cuda").to(torch.bfloat16)
    out = torch.empty(1, 128, dtype=torch.bfloat16, device="cuda")
    return timed([lambda: ops.gemv(x, p, out)], 50)


def sweep(copy_bw: float) -> None:
    """GEMV variants at M = 1 and 16 (unroll depth, blocks per SM) on three shapes, printed for NOTES.md."""
    for n, k in [(6144, 5120), (17408, 5120), (5120, 17408)]:
        nv = [fake_prepared(n, k) for _ in range(max(1, math.ceil(3 * L2_BYTES / (n * k * 9 // 16))))]
        for m, variant, bps in [(1, "", 2), (1, "_u4", 2), (1, "", 1), (16, "", 2), (16, "", 1)]:
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            t = timed([lambda p=p: ops.gemv(x, p, out, variant, bps) for p in nv], 50)
            print(f"sweep {n}x{k} M={m} nt{variant or '(default)'} blocks/SM={bps}: {t * 1e6:.1f} us "
                  f"{100 * nv[0]['wq'].numel() * 9 / 8 / t / copy_bw:.1f}% copy bw", flush=True)
        del nv


def write_outputs(rows: list, copy_bw: float) -> None:
    out_dir = os.environ.get("OUT")
    if not out_dir:
        return
    with open(os.path.join(out_dir, "nvfp4.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) + ["bw_fraction"])
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "bw_fraction": r["ours_bw"] / copy_bw})
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for n, k in SHAPES:
        sel = [r for r in rows if (r["N"], r["K"]) == (n, k)]
        axes[0].plot([r["M"] for r in sel], [r["ratio"] for r in sel], marker="o", label=f"{n}x{k}")
        small = [r for r in sel if r["M"] <= 16]
        axes[1].plot([r["M"] for r in small], [r["ours_bw"] / copy_bw for r in small], marker="o", label=f"{n}x{k}")
    axes[0].set(xscale="log", xlabel="M", ylabel="bf16 time / NVFP4 time", title="speed-up over cuBLAS bf16")
    axes[1].set(xscale="log", xlabel="M", ylabel="fraction of copy bandwidth", title="NVFP4 GEMV bandwidth")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "nvfp4.png"), dpi=110)


def print_table(rows: list, copy_bw: float) -> None:
    print(f"\ncopy bandwidth {copy_bw / 1e12:.2f} TB/s (read + write)")
    print(f"{'N x K':>13} {'M':>5} {'ours us':>9} {'bf16 us':>9} {'bf16/ours':>9} {'%copy bw':>8} {'TFLOP/s':>8}")
    for r in rows:
        bw = f"{100 * r['ours_bw'] / copy_bw:7.1f}%" if r["M"] <= 16 else ""
        print(f"{r['N']:>6}x{r['K']:<6} {r['M']:>5} {r['ours_us']:9.1f} {r['bf16_us']:9.1f} {r['ratio']:9.2f} "
              f"{bw:>8} {r['ours_tflops']:8.1f}")


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    copy_bw = copy_bandwidth()
    failed = 0
    for n, k in [(200, 80), (1000, 1040)] + SHAPES:
        for m, err, verdict in check(n, k):
            failed += verdict == "FAIL"
            print(f"check {n}x{k} M={m}: rel err {err:.2e} {verdict}", flush=True)
    torch.cuda.empty_cache()
    print(f"launch floor (tiny GEMV back to back): {launch_floor() * 1e6:.1f} us")
    if os.environ.get("NVFP4_SWEEP"):
        sweep(copy_bw)
    rows = []
    for n, k in SHAPES:
        rows += bench_shape(n, k)
        print(f"timed {n}x{k}", flush=True)
    write_outputs(rows, copy_bw)
    print_table(rows, copy_bw)
    print("correctness:", "PASS" if not failed else f"FAIL ({failed} cases)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
