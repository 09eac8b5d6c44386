"""GPU bench (device machine): NVFP4 kernels checked, then timed against torch/cuBLAS bf16 on the same logical shapes.

Prints copy bandwidth, launch floors, the GEMV versions side by side (v2 gemv.cu, v5 gemv_tile.cu, timing
diagnostics; again at the end), PASS/FAIL per correctness case, then per shape [N x K] and M (every shape's M <= 16
rows timed first: table_rows): our time (ops.gemv or ops.gemm as ops.linear picks them, their defaults), bf16 time,
ratio, and for M <= 16 the effective bandwidth (packed codes + scales / time) as a fraction of the copy bandwidth. Timing: CUDA events around each launch while the
GPU is held by a sleep kernel (so host launch cost stays out), warm-up, median; weights rotate among copies that
together exceed the L2 several times.
NVFP4_GEMV=v2 makes v2 the default and skips v5. With OUT set, writes nvfp4.csv and nvfp4.png there.
"""
import math
import os
import statistics
import sys
import time

import torch

from bench.output import write_csv
from bench.plotting import pyplot
from kernels.nvfp4 import checkpoint, naive, ops

# one launch for the projections of a layer that read the same input (checkpoint.concat_rows)
FUSED = [("GDN in_proj_qkv+z", [(10240, 5120), (6144, 5120)]), ("attn q+k+v", [(12288, 5120), (1024, 5120), (1024, 5120)]),
         ("MLP gate+up", [(17408, 5120), (17408, 5120)])]
SHAPES = [(10240, 5120), (6144, 5120), (5120, 6144), (17408, 5120), (5120, 17408), (12288, 5120), (248320, 5120)]
M_VALUES = [1, 2, 4, 8, 16, 32, 128, 512, 2048, 8192]
CHECK_M = [1, 5, 16, 32, 33, 512]
GEMV_ROWS_MAX = 16  # the table's effective-bandwidth column and its first pass
WARM_UP_S = 0.5
L2_BYTES = 60 << 20
HOST_S_PER_CALL = 80e-6
# kernels estimated under this are timed in batches of 10 back-to-back launches (as in a model's forward, where the
# one before overlaps through programmatic dependent launch); 200 us put the LM head's M = 1 GEMV (~200 us) on either
# side run to run: 238.6 us single (an event between launches) against ~205 batched (session 11, device run 4)
BATCH_BELOW_S = 2e-3  # generous host cost of one timed call (up to 3 launches + event), sizes the sleep


def timed(fns, reps: int, batch: int = 1) -> float:
    """fns: callables launching one kernel each (rotated) -> median seconds per launch. Events bracket `batch`
    back-to-back launches (as in a model's forward; an event between every launch adds ~2 us to small kernels)."""
    for fn in fns:  # every weight copy once: first calls build per-weight state (e.g. gemv_bc's scale words)
        fn()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    # hold the GPU while the host queues every timed launch, so host launch cost stays out of the numbers
    torch.cuda._sleep(int(2e9 * max(0.01, reps * batch * HOST_S_PER_CALL)))
    for i in range(reps):
        events[i].record()
        for j in range(batch):
            fns[(i * batch + j) % len(fns)]()
    events[reps].record()
    torch.cuda.synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) for i in range(reps)) * 1e-3 / batch


def cells_line(cells: dict, nbytes: int, copy_bw: float) -> str:
    """'label us (% of copy bandwidth)' for each timed cell (seconds) of a kernel reading nbytes."""
    return " ".join(f"{lb} {t * 1e6:.1f} ({100 * nbytes / t / copy_bw:.0f}%)" for lb, t in cells.items())


def timed_auto(fns) -> float:
    """Batches of 10 for kernels under BATCH_BELOW_S, single launches above; reps sized to ~0.25 s."""
    est = timed(fns, 3)
    batch = 10 if est < BATCH_BELOW_S else 1
    return timed(fns, reps_for(est * batch), batch)


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
    for m, kernel in [(m, "") for m in CHECK_M] + [(33, "nvfp4_gemm"), (512, "nvfp4_gemm")]:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        ops.gemv(x, p, out) if m <= ops.GEMV_MAX_M else ops.gemm(x, p, out, kernel)
        ref = x.float() @ ref_w.t()
        err = ((out.float() - ref).norm() / ref.norm()).item()
        ok = not torch.isnan(out).any().item() and err < 1e-2
        rows.append((f"{m}{' ' + kernel if kernel else ''}", err, "PASS" if ok else "FAIL"))
    return rows


def check_fused() -> list:
    """Three shards with global scales 1000x apart fused into one weight -> [(m, rel err, PASS/FAIL)]."""
    shards = [checkpoint.from_tensors(naive.quantize(torch.randn(n, 1024, device="cuda") * s, "modelopt"))
              for n, s in [(1024, 1.0), (256, 30.0), (112, 0.03)]]
    weight, rows = checkpoint.concat_rows(shards), []
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (1, 16, 33):
        x = torch.randn(m, 1024, device="cuda").to(torch.bfloat16)
        out = torch.full((m, weight.shape[0]), float("nan"), dtype=torch.bfloat16, device="cuda")
        (ops.gemv if m <= ops.GEMV_MAX_M else ops.gemm)(x, p, out)
        ref = x.float() @ ref_w.t()
        # per shard: a shard 1000x smaller must not drown in the others' rounding
        errs = [((out[:, a:b].float() - ref[:, a:b]).norm() / ref[:, a:b].norm()).item()
                for a, b in [(0, 1024), (1024, 1280), (1280, 1392)]]
        ok = not torch.isnan(out).any().item() and max(errs) < 1e-2
        rows.append((m, max(errs), "PASS" if ok else "FAIL"))
    return rows


def fake_prepared(n: int, k: int) -> dict:
    """A repacked weight of random codes and sane scales (values do not change the time, zeros are avoided)."""
    np_, kc = -(-n // 128) * 128, -(-k // 64)
    wq = torch.randint(0, 256, (np_ // 16, kc, 32, 16), dtype=torch.uint8, device="cuda")
    wsc = torch.randint(0x30, 0x50, (np_ // 16, kc, 32, 2), dtype=torch.uint8, device="cuda")
    alpha = torch.full((np_ // 16,), 1e-3 * 2.0 ** 62, device="cuda")
    return {"wq": wq, "wsc": wsc, "alpha": alpha, "N": n, "K": k, "Np": np_, "Kc": kc}


def reps_for(seconds: float) -> int:
    return int(min(50, max(5, 0.25 / max(seconds, 1e-6))))


def bench_shape(n: int, k: int, m_values: list) -> list:
    """Table rows of weight [n x k] for each M of m_values: ours (as ops.linear dispatches) and torch bf16, timed."""
    nv_bytes, bf_bytes = n * k // 2 + n * k // 16, n * k * 2
    nv = [fake_prepared(n, k) for _ in range(min(16, max(1, math.ceil(3 * L2_BYTES / nv_bytes))))]
    bf = [torch.randn(n, k, device="cuda").to(torch.bfloat16) for _ in range(min(8, max(1, math.ceil(3 * L2_BYTES / bf_bytes))))]
    rows = []
    for m in m_values:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        # as ops.linear dispatches
        kern = ops.gemv if ops.uses_gemv(m, ops.wgmma_serves(x.device)) else ops.gemm
        ours = [lambda p=p: kern(x, p, out) for p in nv]
        ref = [lambda w=w: torch.mm(x, w.t(), out=out) for w in bf]
        t_ours, t_bf16 = timed_auto(ours), timed_auto(ref)
        print(f"row {n}x{k} M={m}: ours {t_ours * 1e6:.1f} us, bf16 {t_bf16 * 1e6:.1f} us", flush=True)
        rows.append({"N": n, "K": k, "M": m, "ours_us": t_ours * 1e6, "bf16_us": t_bf16 * 1e6,
                     "ratio": t_bf16 / t_ours, "nvfp4_bytes": nv_bytes, "ours_tflops": 2 * m * n * k / t_ours / 1e12,
                     "bf16_tflops": 2 * m * n * k / t_bf16 / 1e12, "ours_bw": nv_bytes / t_ours,
                     "bf16_bw": bf_bytes / t_bf16})
        del x, out
    del nv, bf
    torch.cuda.empty_cache()
    return rows


def table_rows() -> list:
    """Every shape's GEMV rows (M <= GEMV_ROWS_MAX) first, then every shape's GEMM rows, each pass after WARM_UP_S of
    bf16 matmuls. A GEMV cell timed right after the shape before's 8192-row GEMMs read 3-25% slow (the GPU's clock
    after seconds at full power: H200 session 23 run 5, 12288x5120 M = 1 15.2 us in the table against 12.2 alone), and
    the run's first cell 49-95 us against 12.1-12.3 alone (sessions 22-23; a clock still ramping from idle is the
    suspect, not confirmed); a decode step's GEMVs run back to back, not after a prefill's GEMMs."""
    rows = []
    for m_values in ([m for m in M_VALUES if m <= GEMV_ROWS_MAX], [m for m in M_VALUES if m > GEMV_ROWS_MAX]):
        warm_up()
        for n, k in SHAPES:
            rows += bench_shape(n, k, m_values)
            print(f"timed {n}x{k} M {m_values[0]}-{m_values[-1]}", flush=True)
    return sorted(rows, key=lambda r: (SHAPES.index((r["N"], r["K"])), r["M"]))


def warm_up() -> None:
    """WARM_UP_S of bf16 matmuls, so the next cell is not timed at a clock still ramping from idle."""
    a = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    end = time.monotonic() + WARM_UP_S
    while time.monotonic() < end:
        for _ in range(10):
            torch.mm(a, a)
        torch.cuda.synchronize()
    del a


def launch_floor() -> list:
    """Our GEMV on a 128 x 64 weight (launch + one tiny block): [(version, event between launches s, batches of 10 s)]
    for the default (ops.gemv) and v2."""
    p = fake_prepared(128, 64)
    x = torch.randn(1, 64, device="cuda").to(torch.bfloat16)
    out = torch.empty(1, 128, dtype=torch.bfloat16, device="cuda")
    rows = []
    for name, fn in [(ops.GEMV_VERSION, lambda: ops.gemv(x, p, out)), ("v7", lambda: ops.gemv_v2(x, p, out))]:
        rows.append((name, timed([fn], 50), timed([fn], 20, 10)))
    return rows


def bench_fused() -> list:
    """Projections that read the same input, one launch vs separate launches (M = 1 and 16): -> printable lines."""
    lines = []
    for name, parts in FUSED:
        k = parts[0][1]
        nbytes = sum(n * k * 9 // 16 for n, _ in parts)
        copies = min(8, math.ceil(3 * L2_BYTES / nbytes))
        fused = [fake_prepared(sum(n for n, _ in parts), k) for _ in range(copies)]
        sep = [[fake_prepared(n, k) for n, _ in parts] for _ in range(copies)]
        for m in (1, 16):
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            outs = [torch.empty(m, p["N"], dtype=torch.bfloat16, device="cuda") for p in [fused[0]] + sep[0]]
            t_fused = timed_auto([lambda f=f: ops.gemv(x, f, outs[0]) for f in fused])
            t_sep = timed_auto([lambda s=s: [ops.gemv(x, p, o) for p, o in zip(s, outs[1:])] for s in sep])
            lines.append((name, m, t_fused, t_sep, nbytes))
        del fused, sep
    return lines


def write_outputs(rows: list, copy_bw: float) -> None:
    out_dir = os.environ.get("OUT")
    if not out_dir:
        return
    write_csv(os.path.join(out_dir, "nvfp4.csv"), [{**r, "bw_fraction": r["ours_bw"] / copy_bw} for r in rows])
    plt = pyplot()
    if plt is None:
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


def print_fused(lines: list, copy_bw: float) -> None:
    print(f"\n{'fused projections':>20} {'M':>3} {'1 launch us':>11} {'separate us':>11} {'%copy bw (1 launch)':>20}")
    for name, m, t_fused, t_sep, nbytes in lines:
        print(f"{name:>20} {m:>3} {t_fused * 1e6:11.1f} {t_sep * 1e6:11.1f} {100 * nbytes / t_fused / copy_bw:19.1f}%")


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    ops.GEMV_VERSION = os.environ.get("NVFP4_GEMV", ops.GEMV_VERSION)  # "v2": the run's fallback if v5 fails its tests
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "GEMV", ops.GEMV_VERSION)
    copy_bw = copy_bandwidth()
    torch.cuda.empty_cache()
    for name, floor_events, floor_batched in launch_floor():
        print(f"launch floor (tiny GEMV {name}): {floor_events * 1e6:.1f} us with an event per launch, "
              f"{floor_batched * 1e6:.1f} us back to back")
    from bench.nvfp4_gemv_variants import compare, print_compare  # here: it imports this module

    cmp_rows = compare(copy_bw)  # first: the run's main question, before the slower checks
    print_compare(cmp_rows, copy_bw)
    failed = 0
    for n, k in [(200, 80), (1000, 1040)] + SHAPES:
        for m, err, verdict in check(n, k):
            failed += verdict == "FAIL"
            print(f"check {n}x{k} M={m}: rel err {err:.2e} {verdict}", flush=True)
    for m, err, verdict in check_fused():
        failed += verdict == "FAIL"
        print(f"check fused 1024+256+112 rows M={m}: max per-shard rel err {err:.2e} {verdict}", flush=True)
    torch.cuda.empty_cache()
    rows = table_rows()
    write_outputs(rows, copy_bw)
    print_table(rows, copy_bw)
    print_fused(bench_fused(), copy_bw)
    print_compare(cmp_rows, copy_bw)
    print("correctness:", "PASS" if not failed else f"FAIL ({failed} cases)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
