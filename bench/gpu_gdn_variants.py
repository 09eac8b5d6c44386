"""GPU bench (device machine): the fused recurrent decode's kernel variants (kernels/gdn/_decode.py DECODE_VARIANTS)
side by side on one 27B-shaped GDN layer, timed as bench/gpu_gdn.py times the decode (CUDA-graph replays)."""
import torch

from bench.cuda_timing import copy_bandwidth, graph_us, guarded
from bench.gpu_gdn import GRAPH_CALLS, HV, H, K, layer_inputs
from kernels.gdn import ops


def variants_bench():
    """`python3 -m bench.gpu_gdn_variants` (or `bench.gpu_gdn --decode-variants`): decode kernel variants (_decode.DECODE_VARIANTS) on the
    27B layer, bf16 state at N = 1, 8, 32, 64 and f32 state at N = 32, 64, graph-replayed as decode_bench, two
    rounds (variants interleaved); prints a table of the faster round (us, % of the copy bandwidth)."""
    copy_gbs = copy_bandwidth()
    print(f"== device-to-device copy: {copy_gbs:.0f} GB/s (read + write)")
    cases = ((torch.bfloat16, (1, 8, 32, 64), ("regs", "t128x6", "w128", "tma3x2", "tma3x2a", "tma3x2c")),
             (torch.float32, (1, 32, 64), ("regs", "tma3x1")))
    res = {}
    for dtype, ns, names in cases:
        per_slot = HV * K * K * torch.tensor([], dtype=dtype).element_size()
        num_slots = max(2 * max(ns) * GRAPH_CALLS, int(2e9 // per_slot))
        pool = torch.empty(num_slots, HV, K, K, device="cuda", dtype=dtype)
        for i in range(0, num_slots, 256):
            pool[i:i + 256] = (torch.randn(min(256, num_slots - i), HV, K, K, device="cuda") * 0.3).to(dtype)
        for n in ns:
            q, k, v, a, b, A_log, dt_bias, _, _ = layer_inputs(n, seed=3)
            perm = torch.randperm(num_slots, device="cuda")[: n * GRAPH_CALLS].to(torch.int32).view(GRAPH_CALLS, n)
            out = torch.empty(n, HV, K, dtype=torch.bfloat16, device="cuda")
            for rnd in range(2):
                for name in names:
                    calls = [lambda ids=ids, name=name: ops.fused_recurrent_decode(
                        q, k, v, a, b, A_log, dt_bias, pool, ids, out=out, variant=name) for ids in perm]
                    us = guarded(lambda: graph_us(calls)[0], f"{name} N={n}")
                    key = (str(dtype).split(".")[-1], n, name)
                    res[key] = min(res.get(key, float("inf")), us) if us == us else res.get(key, float("nan"))
                    print(f"  round {rnd} {key[0]:8s} N={n:<3d} {name:7s} {us:8.2f} us")
        del pool
        torch.cuda.empty_cache()
    print(f"\n== decode variants, 27B layer (H={H}, HV={HV}, K=V={K}); copy bw {copy_gbs:.0f} GB/s; "
          "best of 2 rounds of graph-replay medians")
    print(f"{'state':8s} {'N':>3s} {'variant':8s} {'us':>8s} {'%copybw':>8s} {'vs regs':>8s}")
    for (st, n, name), us in res.items():
        per_slot = HV * K * K * (2 if st == "bfloat16" else 4)
        nbytes = 2 * n * per_slot + n * (2 * H * K + 2 * HV * K + 4 * HV) * 2
        frac = nbytes / (us * 1e-6) / 1e9 / copy_gbs
        print(f"{st:8s} {n:3d} {name:8s} {us:8.2f} {100 * frac:8.1f} {res[(st, n, 'regs')] / us:8.2f}")


if __name__ == "__main__":
    variants_bench()
