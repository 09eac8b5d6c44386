"""GPU diagnostic (device machine): a timeline of the bulk-copy GEMV (gemv_bulk.cu, MODE_TRACE kernels). Lane 0 of
every warp records %globaltimer (ns) when each stage's data is there and when it is computed; printed: when stage s
lands across all warps (min / median / max from the first block's start), per-warp compute and wait per stage, and
the span. TRACE_SHAPE=NxK (default 17408x5120), M = 1, weights cold (other copies read in between)."""
import os

import cupy
import numpy as np
import torch

from bench.gpu_nvfp4 import fake_prepared
from kernels import _compile
from kernels.nvfp4 import gemv_bulk, ops


def trace(x, p, out, xs: bool, depth: int, others, variant: str = "_trace", after: bool = False,
          blocks_per_sm: int = 2, warps: int = 8) -> np.ndarray:
    """after: the traced launch follows an untraced one on other weights at once (back to back)."""
    for q in others:  # evict p from the L2
        gemv_bulk.gemv_bulk(x, q, out, xs=xs, depth=depth, blocks_per_sm=blocks_per_sm, warps=warps)
    mod = _compile.module(os.path.join(ops.HERE, "gemv_bulk.cu"))
    buf = mod.get_global("bulk_trace")
    cupy.cuda.runtime.memset(buf.ptr, 0, buf.mem.size)
    torch.cuda.synchronize()
    if after:
        gemv_bulk.gemv_bulk(x, others[0], out, xs=xs, depth=depth, blocks_per_sm=blocks_per_sm, warps=warps)
    gemv_bulk.gemv_bulk(x, p, out, xs=xs, depth=depth, variant=variant, blocks_per_sm=blocks_per_sm,
                        warps=warps)
    torch.cuda.synchronize()
    raw = cupy.ndarray((528, 8, 64, 2), dtype=cupy.uint64, memptr=buf).get()
    return raw.astype(np.int64)


def report(raw: np.ndarray, blocks: int, label: str) -> None:
    t = raw[:blocks, :, :, 0].reshape(blocks * 8, 64)
    sm = raw[:blocks, 0, 0, 1]
    t0 = t[:, 0].min()
    rel = np.where(t > 0, t - t0, -1)
    print(f"== {label}: span {(t[:, 63].max() - t0) / 1e3:.1f} us, warps start {np.median(rel[:, 0]) / 1e3:.2f} "
          f"(max {rel[:, 0].max() / 1e3:.2f}) us, end median {np.median(rel[:, 63]) / 1e3:.1f} max {rel[:, 63].max() / 1e3:.1f}")
    for s in (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30):
        a = rel[:, 1 + 2 * s]
        a = a[a >= 0]
        if len(a):
            comp = (t[:, 2 + 2 * s] - t[:, 1 + 2 * s])[t[:, 1 + 2 * s] > 0]
            print(f"  stage {s:2d}: lands min {a.min() / 1e3:6.2f} med {np.median(a) / 1e3:6.2f} max {a.max() / 1e3:6.2f} us"
                  f" ({len(a)} warps), compute med {np.median(comp):5.0f} ns")
    warp_end = rel[:, 63].reshape(blocks, 8)
    print(f"  warps of one block: end spread (max - min) median {np.median(np.ptp(warp_end, axis=1)) / 1e3:.2f} us")
    by_sm(warp_end.max(axis=1), sm)


def by_sm(block_end: np.ndarray, sm: np.ndarray) -> None:
    """Whether late blocks share SMs: per-SM latest block end, the SMs sorted by it, and the blocks' own spread."""
    ends = {}
    for e, s in zip(block_end, sm):
        ends.setdefault(int(s), []).append(e / 1e3)
    late = sorted(ends, key=lambda s: -max(ends[s]))
    pair = [abs(v[0] - v[1]) for v in ends.values() if len(v) == 2] or [0.0]
    print(f"  block end: per-SM max, slowest 8 SMs {[(s, round(max(ends[s]), 1)) for s in late[:8]]}; fastest 4 "
          f"{[(s, round(max(ends[s]), 1)) for s in late[-4:]]}; |difference| of an SM's 2 blocks median "
          f"{np.median(pair):.2f} us")


def main() -> None:
    n, k = (int(v) for v in os.environ.get("TRACE_SHAPE", "17408x5120").split("x"))
    ps = [fake_prepared(n, k) for _ in range(4)]
    x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
    out = torch.empty(1, n, dtype=torch.bfloat16, device="cuda")
    # warps 16: one CTA of two 8-warp virtual blocks per SM (the trace is per virtual block)
    for variant, warps in (("_noflush_trace", 8), ("_noflush_trace", 16), ("_trace", 8), ("_trace", 16),
                           ("_loadonly_trace", 8)):
        blocks = min((ps[0]["Np"] // 128) * ps[0]["Kc"], 2 * _compile.num_sms(x.device))
        report(trace(x, ps[0], out, True, 0, ps[1:], variant, warps=warps), blocks,
               f"{n}x{k} M=1 {variant} warps per CTA {warps}")


if __name__ == "__main__":
    main()
