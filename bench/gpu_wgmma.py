"""GPU bench (device machine): the wgmma NVFP4 GEMM (kernels/nvfp4/gemm_wgmma.py) against the current ops.gemm
(mma.sync) and torch/cuBLAS bf16 on the same logical shapes, all in one run.

Prints PASS/FAIL per correctness case (real quantized weights, the launcher's tile and split-K), then per shape
[N x K] and M in (64, 128, 512, 2048, 8192): each tile kernel (T = 64, 128, 256) with x pre-permuted and no split-K,
the launcher's pick (tile x S split-K blocks; "split") against its pick without split-K (pick_tile, S = 1), the picked
tile with x as is (_x4) and without the proxy fence (_nf), the permute launch alone, timing diagnostics, ops.gemm,
torch.mm on the bf16 weight; us, TFLOP/s and the ratio bf16 time / our time. Where a tile's grid is under 2 waves, a
sweep of S for that tile (shorter timing: 10 batches of 10) shows what pick chose from. Timing as bench/gpu_nvfp4.py:
CUDA events while a sleep kernel holds the GPU, warm-up, median; weights rotate among copies that exceed the L2 3x.
With OUT set, writes wgmma.csv, split_sweep.csv and wgmma.png there. "current" is the mma.sync GEMM (ops.GEMM_KERNEL).
"""
import math
import os
import sys

import torch

from bench.gpu_nvfp4 import L2_BYTES, SHAPES, fake_prepared, timed, timed_auto
from bench.output import write_csv
from bench.plotting import pyplot
from kernels.nvfp4 import checkpoint, gemm_wgmma, naive, ops

M_VALUES = [64, 128, 512, 2048, 8192]
SWEEP_ONLY_M = [33, 100, 1024]  # M values timed only in the split sweep (pick's choices between the table's M)
CHECK_M = [33, 64, 128, 257, 1000]


def check(n: int, k: int) -> list:
    """-> [(m, "TxS", rel err, PASS/FAIL)] for a real quantized random weight against dequantize + f32 matmul."""
    w = torch.randn(n, k, device="cuda") * (0.5 + torch.rand(n, 1, device="cuda"))
    weight = checkpoint.from_tensors(naive.quantize(w, "modelopt"))
    del w
    ref_w, p, rows = weight.dequantize(), ops.prepared(weight), []
    for m in CHECK_M:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        tile, splits = gemm_wgmma.pick(m, p["Np"], p["Kc"], torch.cuda.get_device_properties(0).multi_processor_count)
        gemm_wgmma.gemm_wgmma(x, p, out)
        ref = x.float() @ ref_w.t()
        err = ((out.float() - ref).norm() / ref.norm()).item()
        ok = not torch.isnan(out).any().item() and err < 1e-2
        rows.append((m, f"{tile}x{splits}", err, "PASS" if ok else "FAIL"))
    return rows


def sweep_splits(tile: int, m: int, p: dict, num_sms: int) -> list:
    """S > 1 values timed for tile T: where the S = 1 grid is under 2 waves, up to ~3 waves of blocks and Kc / 8."""
    grid, slots = (p["Np"] // 128) * -(-m // tile), num_sms * gemm_wgmma.TILES[tile][1]
    if grid >= 2 * slots:
        return []
    return [s for s in gemm_wgmma.SPLITS if s <= p["Kc"] // gemm_wgmma.MIN_SPLIT_CHUNKS and grid * s <= 3 * slots]


def split_sweep(x, out, nv: list, n: int, k: int, num_sms: int, sweep: list) -> None:
    """Appends to `sweep` the time of every (T, S) of sweep_splits, S = 1 of those tiles and of pick_tile's, timed
    the same (shorter) way; pick = the launcher's (T, S), base = (pick_tile, 1)."""
    m, np_, kc = x.shape[0], nv[0]["Np"], nv[0]["Kc"]
    chosen, base = gemm_wgmma.pick(m, np_, kc, num_sms), (gemm_wgmma.pick_tile(m, np_, num_sms), 1)
    for tile in sorted(gemm_wgmma.TILES):
        splits = sweep_splits(tile, m, nv[0], num_sms)
        found = {}
        for s in ([1] if splits or tile == base[0] else []) + splits:
            found[s] = timed([lambda p=p, tl=tile, s=s: gemm_wgmma.gemm_wgmma(x, p, out, tl, splits=s)
                              for p in nv], 10, 10)
        sweep += [{"N": n, "K": k, "M": m, "T": tile, "S": s, "us": v * 1e6, "pick": int((tile, s) == chosen),
                   "base": int((tile, s) == base)} for s, v in found.items()]
        if found:
            print(f"sweep {n}x{k} M={m} T={tile}: " + ", ".join(f"S{s} {v * 1e6:.1f}" for s, v in found.items())
                  + " us", flush=True)


def bench_shape(n: int, k: int, num_sms: int, sweep: list) -> list:
    nv_bytes, bf_bytes = n * k * 9 // 16, n * k * 2
    nv = [fake_prepared(n, k) for _ in range(min(16, max(1, math.ceil(3 * L2_BYTES / nv_bytes))))]
    bf = [torch.randn(n, k, device="cuda").to(torch.bfloat16)
          for _ in range(min(8, max(1, math.ceil(3 * L2_BYTES / bf_bytes))))]
    rows = []
    for m in sorted(M_VALUES + SWEEP_ONLY_M):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        pick = gemm_wgmma.pick_tile(m, nv[0]["Np"], num_sms)
        split_tile, splits = gemm_wgmma.pick(m, nv[0]["Np"], nv[0]["Kc"], num_sms)
        if m in SWEEP_ONLY_M:
            split_sweep(x, out, nv, n, k, num_sms, sweep)
            continue
        t = {}
        for tile in sorted(gemm_wgmma.TILES):  # x pre-permuted (the permute launch included), no split-K
            t[f"p{tile}"] = timed_auto([lambda p=p, tl=tile: gemm_wgmma.gemm_wgmma(x, p, out, tl, splits=1)
                                        for p in nv])
        # the launcher's choice (gemm_wgmma's defaults, as ops.gemm calls it); without split-K it is p{pick}
        t["split"] = timed_auto([lambda p=p: gemm_wgmma.gemm_wgmma(x, p, out) for p in nv])
        t["nosplit"] = t[f"p{pick}"]
        split_sweep(x, out, nv, n, k, num_sms, sweep)
        t["x4"] = timed_auto([lambda p=p: gemm_wgmma.gemm_wgmma(x, p, out, pick, permute=False) for p in nv])
        t["nf"] = timed_auto([lambda p=p: gemm_wgmma.gemm_wgmma(x, p, out, pick, fence=False) for p in nv])
        t["perm"] = timed_auto([lambda: permute_only(x, nv[0])])
        for diag in ("_nox", "_nodec"):  # T = 256 without x copies / without decode: what each costs
            fns = [lambda p=p, d=diag: gemm_wgmma.gemm_wgmma(x, p, out, 256, diag=d) for p in nv]
            t[diag[1:]] = timed_auto(fns) if m >= 2048 else float("nan")
        # the mma.sync GEMM (naming the kernel skips ops.gemm's wgmma path)
        t["current"] = timed_auto([lambda p=p: ops.gemm(x, p, out, ops.GEMM_KERNEL) for p in nv])
        t["bf16"] = timed_auto([lambda w=w: torch.mm(x, w.t(), out=out) for w in bf])
        flop, ours = 2 * m * n * k, t["split"]
        best = min(v for key, v in t.items() if key in ("p64", "p128", "p256", "x4", "nf", "split"))
        row = {"N": n, "K": k, "M": m, "pick": f"{split_tile}x{splits}",
               **{f"{key}_us": v * 1e6 for key, v in t.items()},
               "wgmma_tflops": flop / ours / 1e12, "bf16_tflops": flop / t["bf16"] / 1e12,
               "current_tflops": flop / t["current"] / 1e12, "ratio": t["bf16"] / ours,
               "nosplit_ratio": t["bf16"] / t["nosplit"], "best_ratio": t["bf16"] / best,
               "current_ratio": t["bf16"] / t["current"]}
        print(f"row {n}x{k} M={m}: " + ", ".join(f"{key} {v * 1e6:.1f}" for key, v in t.items()) + " us", flush=True)
        rows.append(row)
        del x, out
    del nv, bf
    torch.cuda.empty_cache()
    return rows


def permute_only(x: torch.Tensor, p: dict) -> None:
    """The nvfp4_permute_x launch gemm_wgmma makes before the GEMM (its share of the p* times)."""
    import numpy as np

    m, kc = x.shape[0], p["Kc"]
    xp = torch.empty(m, kc * 64, dtype=torch.bfloat16, device=x.device)
    stream = gemm_wgmma._compile.external_stream(torch.cuda.current_stream().cuda_stream)
    gemm_wgmma._function("nvfp4_permute_x")((-(-m * kc * 8 // 256),), (256,), (
        np.uint64(x.data_ptr()), np.uint64(xp.data_ptr()), np.int32(m), np.int32(p["K"]), np.int32(kc)), stream=stream)


def print_table(rows: list) -> None:
    print("\nus per call; pT = tile T, x pre-permuted (permute launch included), no split-K; split = the launcher's "
          "pick TxS (tile x split-K blocks per tile); nosplit = its pick without split-K (pick_tile, S = 1: the "
          "pT it names); x4 = x as is, nf = no proxy fence (picked tile, S = 1); perm = the permute launch alone; "
          "ratio = bf16 time / split (target >= 0.70), ns = bf16 / nosplit, best = bf16 / fastest wgmma variant; nox, "
          "nodec (M >= 2048): p256 without x copies / without decode (wrong results, timing only)")
    keys = ["p64", "p128", "p256", "split", "nosplit", "x4", "nf", "perm", "nox", "nodec", "current", "bf16"]
    print(f"{'N x K':>13} {'M':>5} {'TxS':>6} " + " ".join(f"{k:>8}" for k in keys)
          + f" {'TF/s':>6} {'bf TF/s':>7} {'ratio':>6} {'ns':>6} {'best':>6} {'cur':>6}")
    for r in rows:
        print(f"{r['N']:>6}x{r['K']:<6} {r['M']:>5} {r['pick']:>6} " + " ".join(f"{r[k + '_us']:8.1f}" for k in keys)
              + f" {r['wgmma_tflops']:6.0f} {r['bf16_tflops']:7.0f} {r['ratio']:6.2f} {r['nosplit_ratio']:6.2f} "
              f"{r['best_ratio']:6.2f} {r['current_ratio']:6.2f}")


def print_sweep_summary(sweep: list) -> None:
    """Per (shape, M) of the sweep: the launcher's (T, S) against (pick_tile, 1) and the fastest (T, S) timed."""
    print("\nsplit sweep (10 x 10 launches each): pick = launcher's TxS, base = pick_tile x 1, best = fastest timed")
    groups = {}
    for r in sweep:
        groups.setdefault((r["N"], r["K"], r["M"]), []).append(r)
    for (n, k, m), rs in groups.items():
        pick = next(r for r in rs if r["pick"])
        base = next(r for r in rs if r["base"])
        best = min(rs, key=lambda r: r["us"])
        print(f"{n:>6}x{k:<6} M={m:<5} pick {pick['T']}x{pick['S']} {pick['us']:8.1f}  base {base['T']}x1 "
              f"{base['us']:8.1f}  best {best['T']}x{best['S']} {best['us']:8.1f}  "
              f"pick/base {pick['us'] / base['us']:.2f}  pick/best {pick['us'] / best['us']:.2f}")


def save_csv(name: str, rows: list) -> None:
    """OUT/name: rows as CSV; nothing without OUT or rows."""
    out_dir = os.environ.get("OUT")
    if out_dir and rows:
        write_csv(os.path.join(out_dir, name), rows)


def write_plot(rows: list) -> None:
    """OUT/wgmma.png: bf16 time / ours against M per shape (wgmma with the launcher's pick, and the mma.sync GEMM),
    with the 0.70 target drawn in; nothing without OUT or matplotlib."""
    out_dir = os.environ.get("OUT")
    plt = pyplot()
    if plt is None:
        return
    if not out_dir or not rows:
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for n, k in SHAPES:
        sel = [r for r in rows if (r["N"], r["K"]) == (n, k)]
        line = ax.plot([r["M"] for r in sel], [r["ratio"] for r in sel], marker="o", label=f"{n}x{k} wgmma")[0]
        ax.plot([r["M"] for r in sel], [r["current_ratio"] for r in sel], ls=":", color=line.get_color())
    ax.axhline(0.7, color="k", lw=0.8, ls="--", label="target 0.70")
    ax.set(xscale="log", xlabel="M (tokens)", ylabel="cuBLAS bf16 time / NVFP4 time",
           title="NVFP4 GEMM on H200: wgmma (solid) and mma.sync (dotted) against cuBLAS bf16")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "wgmma.png"), dpi=110)


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    print(f"device {props.name}, {props.multi_processor_count} SMs", flush=True)
    failed = 0
    for n, k in SHAPES[:-1] + [(1392, 1088)]:  # the LM head's check would quantize 1.3 G weights: skipped
        for m, tile, err, verdict in check(n, k):
            failed += verdict != "PASS"
            print(f"check {n}x{k} M={m} TxS={tile}: rel err {err:.2e} {verdict}", flush=True)
        torch.cuda.empty_cache()
    rows, sweep = [], []
    for n, k in SHAPES:
        rows += bench_shape(n, k, props.multi_processor_count, sweep)
        save_csv("split_sweep.csv", sweep)  # after every shape: what a run cut short measured still comes back
        save_csv("wgmma.csv", rows)
    write_plot(rows)
    print_table(rows)
    print_sweep_summary(sweep)
    print(f"\n{failed} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
