"""GPU bench (device machine): the stream-K NVFP4 GEMM (gemm_wgmma.py stream_k) against the launcher's current pick
(tile x split-K) and torch/cuBLAS bf16 on the same logical shapes, in one run.

`python3 -m bench.gpu_stream_k`: per shape [N x K] and M in (256, 512, 1024, 2048): the pick, stream-K with T = 256
and 0 / 1 waves of whole tiles first ("sk256w0", "sk256w1"), T = 128 with 0 waves, cuBLAS bf16; us, and bf16 time /
ours. Timing as bench/gpu_wgmma.py (bench/gpu_nvfp4.timed_auto: CUDA events, warm-up, median; weights rotate among
copies that exceed the L2 3x). With OUT set, writes stream_k.csv there.
"""
import math
import os

import torch

from bench.gpu_nvfp4 import L2_BYTES, SHAPES, fake_prepared, timed_auto
from bench.output import write_csv
from kernels.nvfp4 import gemm_wgmma

M_VALUES = [256, 512, 1024, 2048]
VARIANTS = {"pick": {}, "sk256w0": {"tile": 256, "stream_k": 0}, "sk256w1": {"tile": 256, "stream_k": 1},
            "sk128w0": {"tile": 128, "stream_k": 0}}


def bench_shape(n: int, k: int, num_sms: int) -> list:
    nv = [fake_prepared(n, k) for _ in range(min(16, max(1, math.ceil(3 * L2_BYTES / (n * k * 9 // 16)))))]
    bf = [torch.randn(n, k, device="cuda").to(torch.bfloat16)
          for _ in range(min(8, max(1, math.ceil(3 * L2_BYTES / (n * k * 2)))))]
    rows = []
    for m in M_VALUES:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        t = {name: timed_auto([lambda p=p, kw=kw: gemm_wgmma.gemm_wgmma(x, p, out, **kw) for p in nv])
             for name, kw in VARIANTS.items()}
        t["bf16"] = timed_auto([lambda w=w: torch.mm(x, w.t(), out=out) for w in bf])
        tile, splits = gemm_wgmma.pick(m, nv[0]["Np"], nv[0]["Kc"], num_sms)
        row = {"N": n, "K": k, "M": m, "pick": f"{tile}x{splits}", **{f"{key}_us": v * 1e6 for key, v in t.items()}}
        row.update({f"{key}_ratio": t["bf16"] / v for key, v in t.items() if key != "bf16"})
        print(f"{n:>6}x{k:<6} M={m:<5} {row['pick']:>6} " + " ".join(
            f"{key} {v * 1e6:7.1f} ({t['bf16'] / v:4.2f})" for key, v in t.items()), flush=True)
        rows.append(row)
    del nv, bf
    torch.cuda.empty_cache()
    return rows


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    torch.manual_seed(0)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    print("us per call (cuBLAS bf16 time / ours); pick = the launcher's tile x split-K; skTwW = stream-K, tile T, "
          "W waves of whole tiles first")
    rows = [r for n, k in SHAPES for r in bench_shape(n, k, num_sms)]
    out_dir = os.environ.get("OUT")
    if out_dir and rows:
        write_csv(os.path.join(out_dir, "stream_k.csv"), rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
