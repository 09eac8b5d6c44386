"""GPU bench (device machine): the block-column GEMV (v10, kernels/nvfp4/gemv_bc.cu, M = 1) against ops.gemv's
pick (v5 / v7 / cluster / xs) per 27B shape and fused projection, timed as bench/gpu_nvfp4.py times (GPU held by a
sleep kernel, batches of 10 back-to-back launches on rotating weight copies that exceed the L2).

Columns (M = 1): pick = ops.gemv as dispatched; bc = gemv_bc (unroll 3), bc_u2 = 2 chunk pairs per half-buffer; bc_b3
= 3 blocks per SM (unroll 2); *_pdl = launched with programmatic dependent launch (each launch's weight stream starts
while the one before finishes); diagnostics (wrong results): bc_nf = no partial row groups (what the reduction costs),
bc_lo = loads only (the same loads without decode / MMA); bt_u2 / bt_u3 = gemv_bt (v12, whole tiles per 16-warp block,
PDL) where it applies. M = 2, 4, 8, 16: ops.gemv's pick launched with PDL (the default) and plainly ("pick_plain"),
and bcr = gemv_bcr (v10r) where x fits its shared memory. Each cell: us and % of the copy bandwidth measured in the
same run. Checks gemv_bc and gemv_bcr once per shape first (rel < 1e-2 against dequantize + f32 matmul, NaN-poisoned
output).
"""
import math
import sys

import torch

from bench.gpu_gemv_bulk import SHAPES
from bench.gpu_nvfp4 import L2_BYTES, cells_line, copy_bandwidth, fake_prepared, timed
from kernels import _compile
from kernels.nvfp4 import checkpoint, gemv_bc, gemv_bt, naive, ops


def check(n: int, k: int) -> float:
    """Worst relative error of gemv_bc (every unroll) and gemv_bcr (M = 2, 5) on a quantized random weight."""
    weight = checkpoint.from_tensors(naive.quantize(torch.randn(n, k, device="cuda"), "modelopt"))
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    worst = 0.0
    for unroll in gemv_bc.UNROLLS:
        x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
        out = torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemv_bc.gemv_bc(x, p, out, unroll=unroll)
        ref = x.float() @ ref_w.t()
        worst = max(worst, float("inf") if out.isnan().any() else ((out.float() - ref).norm() / ref.norm()).item())
    for m in (2, 5):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        if not gemv_bc.rows_applies(x, p):
            continue
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemv_bc.gemv_bcr(x, p, out)
        ref = x.float() @ ref_w.t()
        worst = max(worst, float("inf") if out.isnan().any() else ((out.float() - ref).norm() / ref.norm()).item())
    return worst


def cells_for(x, out, nv) -> dict:
    run = lambda **kw: timed([lambda p=p: gemv_bc.gemv_bc(x, p, out, **kw) for p in nv], 20, 10)  # noqa: E731
    return {"pick": timed([lambda p=p: ops.gemv(x, p, out) for p in nv], 20, 10), "bc": run(pdl=False),
            "bc_u2": run(unroll=2, pdl=False), "bc_pdl": run(pdl=True), "bc_u2_pdl": run(unroll=2, pdl=True),
            "bc_b3_pdl": run(unroll=2, blocks_per_sm=3, pdl=True),
            "bc_nf": run(variant="_noflush", pdl=False), "bc_lo": run(variant="_loadonly", pdl=False),
            "bc_lo_pdl": run(variant="_loadonly", pdl=True), **bt_cells(x, out, nv)}


def bt_cells(x, out, nv) -> dict:
    """gemv_bt (v12: whole tiles per 16-warp block, no split-K flush) at each unroll, PDL, where it applies."""
    if not gemv_bt.applies(x, nv[0], _compile.num_sms(x.device)):
        return {}
    return {f"bt_u{u}": timed([lambda p=p, u=u: gemv_bt.gemv_bt(x, p, out, unroll=u) for p in nv], 20, 10)
            for u in gemv_bt.UNROLLS}


def pick_ab(x, out, nv) -> dict:
    """ops.gemv as dispatched with and without PDL, and gemv_bcr (v10r, block columns for 2..8 rows) where it
    applies."""
    cells = {"pick": timed([lambda p=p: ops.gemv(x, p, out) for p in nv], 20, 10)}
    ops.PDL = False
    cells["pick_plain"] = timed([lambda p=p: ops.gemv(x, p, out) for p in nv], 20, 10)
    ops.PDL = True
    if gemv_bc.rows_applies(x, nv[0]):
        cells["bcr"] = timed([lambda p=p: gemv_bc.gemv_bcr(x, p, out) for p in nv], 20, 10)
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
        nv = [gemv_bc.prepared_bc(fake_prepared(n, k))
              for _ in range(max(1, math.ceil(3 * L2_BYTES / nbytes)))]
        x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
        out = torch.empty(1, n, dtype=torch.bfloat16, device="cuda")
        print(f"{n}x{k} M=1: {cells_line(cells_for(x, out, nv), nbytes, copy_bw)}", flush=True)
        for m in (2, 4, 8, 16):
            xm = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            outm = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            print(f"{n}x{k} M={m}: {cells_line(pick_ab(xm, outm, nv), nbytes, copy_bw)}", flush=True)
        del nv
        torch.cuda.empty_cache()
    print("correctness:", "PASS" if not failed else f"FAIL ({failed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
