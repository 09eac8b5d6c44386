"""GPU bench (device machine): the bulk-copy GEMV (v8, kernels/nvfp4/gemv_bulk.cu) against ops.gemv's pick (v5 / v7 /
cluster / xs) per 27B shape and fused projection, M in (1, 16), timed as bench/gpu_nvfp4.py times (GPU held by
a sleep kernel, batches of 10 back-to-back launches on rotating weight copies that exceed the L2).

Columns: pick = ops.gemv as dispatched now; v8 = gemv_bulk defaults (x staged at M = 1 where small); v8_w16 = one CTA of 16 warps per SM (two 8-warp blocks' work); v8_b3 = 3 CTAs per SM (fewer registers);
diagnostics (wrong results): v8_lo = loads only (the copy pipeline without decode / MMA), *_nf = no partial row
groups (what the reduction costs), v8_nomma = the decode without the MMA. Each cell: us
and % of the copy bandwidth measured in the same run. Checks v8 once per shape (rel < 1e-2, NaN-poisoned output).
"""
import math
import sys

import torch

from bench.gpu_nvfp4 import L2_BYTES, cells_line, copy_bandwidth, fake_prepared, timed
from kernels.nvfp4 import checkpoint, gemv_bulk, naive, ops

SHAPES = [(6144, 5120), (10240, 5120), (5120, 6144), (17408, 5120), (5120, 17408), (12288, 5120), (16384, 5120),
          (14336, 5120), (34816, 5120), (248320, 5120)]


def check(n: int, k: int) -> float:
    w = torch.randn(n, k, device="cuda")
    weight = checkpoint.from_tensors(naive.quantize(w, "modelopt"))
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    worst = 0.0
    for m, xs, warps in ((1, None, 8), (1, False, 8), (16, None, 8), (1, None, 16), (1, False, 16), (16, None, 16)):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemv_bulk.gemv_bulk(x, p, out, xs=xs, warps=warps)
        ref = x.float() @ ref_w.t()
        worst = max(worst, float("inf") if out.isnan().any() else ((out.float() - ref).norm() / ref.norm()).item())
    return worst


def cells_for(x, out, nv) -> dict:
    m = x.shape[0]
    run = lambda **kw: timed([lambda p=p: gemv_bulk.gemv_bulk(x, p, out, **kw) for p in nv], 20, 10)  # noqa: E731
    cells = {"pick": timed([lambda p=p: ops.gemv(x, p, out) for p in nv], 20, 10), "v8": run(), "v8_w16": run(warps=16)}
    if m == 1:
        cells["v8_w16_nf"] = run(warps=16, xs=True, variant="_noflush")
        cells["v8_nf"] = run(xs=True, variant="_noflush")
        cells["v8_nomma"] = run(xs=True, variant="_nomma")
        cells["v8_b3"] = run(xs=True, blocks_per_sm=3)
        cells["v8_lo"] = run(xs=False, variant="_loadonly")
    return cells


def main() -> int:
    copy_bw = copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s")
    failed = 0
    for n, k in SHAPES:
        if n * k < 200e6:
            err = check(n, k)
            failed += not err < 1e-2
            print(f"check {n}x{k}: rel err {err:.2e} {'PASS' if err < 1e-2 else 'FAIL'}", flush=True)
        nbytes = n * k * 9 // 16
        nv = [fake_prepared(n, k) for _ in range(max(1, math.ceil(3 * L2_BYTES / nbytes)))]
        for m in (1, 16):
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            cells = cells_for(x, out, nv)
            line = cells_line(cells, nbytes, copy_bw)
            print(f"{n}x{k} M={m}: {line}", flush=True)
        del nv
        torch.cuda.empty_cache()
    print("correctness:", "PASS" if not failed else f"FAIL ({failed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
