"""GPU bench (device machine): the cluster split-K GEMV (kernels/nvfp4/gemv_cluster.cu) against the persistent split-K
GEMV with its global flush (gemv.cu, v7) and ops.gemv's pick, per 27B shape, M in (1, 4, 16) and cluster size 1..8.

Checks every timed cluster size once against dequantize-then-f32-matmul (rel < 1e-2, NaN-poisoned output), then times
as bench/gpu_nvfp4.py does (GPU held by a sleep kernel, batches of 10 on rotating weight copies that exceed the L2).
Prints us and % of the copy bandwidth measured in the same run; the chosen size (ops.cluster_size) is starred.
"""
import math
import sys

import torch

from bench.gpu_nvfp4 import L2_BYTES, cells_line, copy_bandwidth, fake_prepared, timed
from kernels.nvfp4 import checkpoint, naive, ops

SHAPES = [(6144, 5120), (10240, 5120), (5120, 6144), (5120, 17408), (16384, 5120), (14336, 5120), (12288, 5120),
          (17408, 5120)]


def check(n: int, k: int, cs: int) -> float:
    w = torch.randn(n, k, device="cuda")
    weight = checkpoint.from_tensors(naive.quantize(w, "modelopt"))
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    worst = 0.0
    for m in (1, 13, 16, 27):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        ops.gemv_cluster(x, p, out, cs)
        ref = x.float() @ ref_w.t()
        err = float("inf") if out.isnan().any() else ((out.float() - ref).norm() / ref.norm()).item()
        worst = max(worst, err)
    return worst


def main() -> int:
    copy_bw = copy_bandwidth()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s, {sms} SMs")
    failed = 0
    for n, k in SHAPES:
        nbytes = n * k * 9 // 16
        nv = [fake_prepared(n, k) for _ in range(max(1, math.ceil(3 * L2_BYTES / nbytes)))]
        pick = ops.cluster_size(nv[0], sms)
        sizes = [cs for cs in range(1, 9) if nv[0]["Kc"] >= 8 * cs]
        for cs in sizes:
            err = check(n, k, cs)
            failed += not err < 1e-2
            print(f"check {n}x{k} cs={cs}: rel err {err:.2e} {'PASS' if err < 1e-2 else 'FAIL'}", flush=True)
        for m in (1, 4, 16):
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            cells = {"v7": timed([lambda p=p: ops.gemv_v2(x, p, out, xs=False) for p in nv], 20, 10),
                     "v8_xs": timed([lambda p=p: ops.gemv_v2(x, p, out, xs=True) for p in nv], 20, 10)
                     if m * nv[0]["Kc"] * 128 <= ops.XS_MAX_BYTES else float("nan"),
                     "gemv": timed([lambda p=p: ops.gemv(x, p, out) for p in nv], 20, 10)}
            for cs in sizes:
                cells[f"cl{cs}{'*' if cs == pick else ''}"] = timed(
                    [lambda p=p, cs=cs: ops.gemv_cluster(x, p, out, cs) for p in nv], 20, 10)
            line = cells_line(cells, nbytes, copy_bw)
            print(f"{n}x{k} M={m} groups={nv[0]['Np'] // 128}: {line}", flush=True)
        del nv
        torch.cuda.empty_cache()
    print("correctness:", "PASS" if not failed else f"FAIL ({failed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
