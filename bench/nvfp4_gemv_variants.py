"""Part of bench/gpu_nvfp4.py (which runs it first and prints it again at the end; not a bench of its own): every
NVFP4 GEMV version side by side on the 27B shapes at M = 1, 4, 16, with the timing-only diagnostics (*_noflush,
*_loadonly: wrong results), timed as gpu_nvfp4 times the GEMVs (batches of 10 back-to-back launches on rotating
weight copies)."""
import math

import torch

from bench.gpu_nvfp4 import L2_BYTES, SHAPES, fake_prepared, timed
from kernels.nvfp4 import gemv_tile, ops


# GEMV versions side by side: (label, M values, call); "_noflush"/"_loadonly": timing only (wrong results). v2_atomic:
# one scalar red.add per sum; v7: one red.add.v4 per 4; v8_xs: x in shared memory; v5: gemv_tile.cu (no split-K)
GEMV_VARIANTS = [("v2_atomic", (1, 4, 16), lambda x, p, o: ops.gemv_v2(x, p, o, "_atomic", xs=False)),
                 ("v7", (1, 4, 16), lambda x, p, o: ops.gemv_v2(x, p, o, xs=False)),
                 ("v8_xs", (1, 4), lambda x, p, o: ops.gemv_v2(x, p, o, xs=True)),
                 ("v8_xs_u4", (1,), lambda x, p, o: ops.gemv_v2(x, p, o, "_u4", xs=True)),
                 ("v8_xs_loadonly", (1,), lambda x, p, o: ops.gemv_v2(x, p, o, "_loadonly", xs=True)),
                 ("v5", (1, 4), lambda x, p, o: gemv_tile.gemv_tile(x, p, o)),
                 ("v5_bal", (1, 4), lambda x, p, o: gemv_tile.gemv_tile(x, p, o, balanced=True)),
                 ("v7_noflush", (1, 16), lambda x, p, o: ops.gemv_v2(x, p, o, "_noflush", xs=False)),
                 ("v7_loadonly", (1,), lambda x, p, o: ops.gemv_v2(x, p, o, "_loadonly", xs=False))]


def compare(copy_bw: float) -> list:
    """Every GEMV variant on every shape at its M values (v5 wherever it can run, also where ops.gemv picks v2), same
    weights, batches of 10 -> [(n, k, m, label, s)]."""
    rows = []
    for n, k in SHAPES:
        nv = [fake_prepared(n, k) for _ in range(max(1, math.ceil(3 * L2_BYTES / (n * k * 9 // 16))))]
        for m in (1, 4, 16):
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            for label, ms, fn in GEMV_VARIANTS:
                depth = gemv_tile.TILE_DEPTHS[1 if m <= 8 else 2][0]
                v5_runs = ops.GEMV_VERSION == "v5" and gemv_tile.tile_fits(m, nv[0], depth) and k % 8 == 0
                if m not in ms or (label.startswith("v5") and not v5_runs):  # v5 wherever it can run
                    continue
                try:
                    t = timed([lambda p=p: fn(x, p, out) for p in nv], 20, 10)
                except Exception as exc:  # noqa: BLE001 - report the variant and go on with the others
                    print(f"cmp {n}x{k} M={m} {label}: failed: {type(exc).__name__}: {exc}", flush=True)
                    torch.cuda.synchronize()
                    continue
                rows.append((n, k, m, label, t))
                pct = 100 * (n * k * 9 // 16) / t / copy_bw
                print(f"cmp {n}x{k} M={m} {label}: {t * 1e6:.1f} us {pct:.1f}% copy bw", flush=True)
        del nv
        torch.cuda.empty_cache()
    return rows


def print_compare(rows: list, copy_bw: float) -> None:
    labels = [v[0] for v in GEMV_VARIANTS]
    print(f"\nGEMV us (% copy bw {copy_bw / 1e12:.2f} TB/s); *_noflush, *_loadonly: wrong results (timing only)")
    print(f"{'N x K':>13} {'M':>3} " + " ".join(f"{lb:>16}" for lb in labels))
    for n, k in SHAPES:
        for m in (1, 4, 16):
            got = {lb: t for (rn, rk, rm, lb, t) in rows if (rn, rk, rm) == (n, k, m)}
            cells = [f"{got[lb] * 1e6:7.1f} ({100 * n * k * 9 / 16 / got[lb] / copy_bw:4.1f}%)" if lb in got else ""
                     for lb in labels]
            if got:
                print(f"{n:>6}x{k:<6} {m:>3} " + " ".join(f"{c:>16}" for c in cells))
