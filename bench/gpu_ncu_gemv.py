"""Profiling target (device machine, run under ncu): one shape's M = 1 GEMV through v7 (gemv.cu) and v8
(gemv_bulk.cu), each launched 3 times, so `ncu -k regex:<kernel> --launch-skip 1 --launch-count 1` can pick one.
NCU_SHAPE=NxK (default 17408x5120)."""
import os

import torch

from bench.gpu_nvfp4 import fake_prepared
from kernels.nvfp4 import gemv_bulk, ops


def main() -> None:
    n, k = (int(v) for v in os.environ.get("NCU_SHAPE", "17408x5120").split("x"))
    p = fake_prepared(n, k)
    x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
    out = torch.empty(1, n, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        ops.gemv_v2(x, p, out, xs=False)
        gemv_bulk.gemv_bulk(x, p, out)
    torch.cuda.synchronize()
    print("done")


if __name__ == "__main__":
    main()
