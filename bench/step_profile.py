"""Kernel time of one step by kind (torch.profiler, CUDA activity), for the GPU benches (bench/gpu_model.py): what
dominates the device time, and how the summed kernel time compares with the step time (the rest is launch gaps).
Not a bench of its own (bench/gpu_all.sh runs bench/gpu_*.py)."""
import torch

# kind -> substrings of the kernel names counted under it (first match wins; the rest is "elementwise/norm/other")
CATEGORIES = (("nvfp4 linear", ("nvfp4_",)), ("gdn recurrent", ("gdn_recurrent",)), ("gdn conv", ("gdn_conv",)),
              ("fused norm/silu", ("norm_rms", "silu_mul")),
              ("decode attention kernels", ("paged_decode", "attn_qk_norm_rope_cache", "attn_gate_mul")),
              ("attention matmul", ("gemm", "gemv", "nvjet", "xmma", "cutlass")),
              ("gather/scatter", ("index", "gather")))


def profile_kernels(run, label: str, top: int) -> dict:
    """run(): one step (called once to warm up, then once profiled). Prints the step's kernel count and time by
    kind and its `top` longest kernels; returns {kind: us}."""
    from torch.profiler import ProfilerActivity, profile

    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    kernels = []
    for evt in prof.key_averages():
        us = getattr(evt, "self_device_time_total", None) or getattr(evt, "self_cuda_time_total", 0)
        if us > 0:
            kernels.append((us, evt.count, evt.key))
    total = sum(k[0] for k in kernels)
    by_kind = dict.fromkeys([name for name, _ in CATEGORIES] + ["elementwise/norm/other"], 0.0)
    for us, _, key in kernels:
        kind = next((name for name, subs in CATEGORIES if any(sub in key for sub in subs)), "elementwise/norm/other")
        by_kind[kind] += us
    print(f"  profile {label}: {sum(k[1] for k in kernels)} kernels, {total / 1e3:.2f} ms of kernel time; "
          + ", ".join(f"{kind} {us / 1e3:.2f} ms" for kind, us in by_kind.items()), flush=True)
    for us, count, key in sorted(kernels, reverse=True)[:top]:
        print(f"    {us / 1e3:7.3f} ms  x{count:<5} {key[:90]}")
    return by_kind
