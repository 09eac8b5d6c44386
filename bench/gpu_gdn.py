"""GPU bench (run on the device by `make bench-gpu`): Gated DeltaNet kernels, checked then timed against fla.

Order: device-to-device copy bandwidth; PASS/FAIL correctness (ours vs kernels/gdn/naive.py, fla vs naive);
decode at N = 1, 8, 32, 64 on one 27B-shaped GDN layer (H=16, HV=48, K=V=128), f32 and bf16 state, with bytes
moved and the fraction of the copy bandwidth; chunked prefill at T = 4K, 16K, 32K and 8 x 2K varlen, ours vs
fla's chunk_gated_delta_rule / fused_recurrent_gated_delta_rule. CUDA events, warm-up, medians; decode
timed as CUDA-graph replays of 16 calls on rotating slots (state >> L2), launched with programmatic dependent launch
(the default: the median of DECODE_ROUNDS timings, their range printed) and plainly ("plain launch"). CSV + PNG to $OUT when set.
"""
import os
import statistics

import torch
import torch.nn.functional as F

from bench.cuda_timing import copy_bandwidth, graph_us, guarded, median_ms
from bench.output import write_csv
from bench.plotting import pyplot
from kernels.gdn import _decode, _launch, naive, ops

H, HV, K = 16, 48, 128
GRAPH_CALLS = 16
DECODE_ROUNDS = 5  # ours is timed this many times (each a median of 20 graph replays); the table gives the median


def layer_inputs(num_tokens, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    def rnd(*shape, s=1.0):
        return (torch.randn(*shape, device="cuda", generator=gen) * s).bfloat16()
    q, k, v = rnd(num_tokens, H, K), rnd(num_tokens, H, K), rnd(num_tokens, HV, K)
    a, b = rnd(num_tokens, HV), rnd(num_tokens, HV, s=2.0)
    A_log = torch.empty(HV, device="cuda").uniform_(0.0, 2.5, generator=gen).log()
    dt_bias = torch.randn(HV, device="cuda", generator=gen) * 0.5
    g = -A_log.exp() * F.softplus(a.float() + dt_bias)
    return q, k, v, a, b, A_log, dt_bias, g, torch.sigmoid(b.float())


def rel(x, ref) -> float:
    x, ref = x.double(), ref.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def check(name, err, tol, results):
    ok = err < tol
    results.append(ok)
    print(f"  {'PASS' if ok else 'FAIL'} {name}: rel err {err:.2e} (< {tol:.0e})")


def correctness(fla) -> bool:
    print("== correctness (fresh random inputs, f32 outputs vs the naive f32 recurrence)")
    results = []
    for dtype, tol in ((torch.float32, 1e-3), (torch.bfloat16, 1e-2)):
        q, k, v, a, b, A_log, dt_bias, g, beta = layer_inputs(8, seed=1)
        pool = (torch.randn(20, HV, K, K, device="cuda") * 0.3).to(dtype)
        slots = [3, 17, 0, 9, 12, 5, 19, 7]
        init = pool[slots].float()
        ref_o, ref_s = naive.recurrent_gated_delta_rule(q.float(), k.float(), v.float(), g, beta, initial_state=init,
                                                        cu_seqlens=torch.arange(9, device="cuda"))
        out = torch.full((8, HV, K), float("nan"), device="cuda")
        ids = torch.tensor(slots, dtype=torch.int32, device="cuda")
        ops.fused_recurrent_decode(q, k, v, a, b, A_log, dt_bias, pool, ids, out=out)
        check(f"decode o ({dtype})", rel(out, ref_o), tol, results)
        check(f"decode state ({dtype})", rel(pool[slots], ref_s), tol, results)
        lens = [1, 63, 64, 65, 1000]
        cu = [0] + [sum(lens[:i + 1]) for i in range(len(lens))]
        q, k, v, a, b, A_log, dt_bias, g, beta = layer_inputs(cu[-1], seed=2)
        pool = (torch.randn(6, HV, K, K, device="cuda") * 0.3).to(dtype)
        ids = torch.tensor([4, 1, 5, 0, 2], dtype=torch.int32, device="cuda")
        init = pool[ids.long()].float()
        ref_o, ref_s = naive.recurrent_gated_delta_rule(q.float(), k.float(), v.float(), g, beta, initial_state=init,
                                                        cu_seqlens=torch.tensor(cu, device="cuda"))
        out = torch.full((cu[-1], HV, K), float("nan"), device="cuda")
        ops.chunk_prefill(q, k, v, a, b, A_log, dt_bias, pool, ids, cu, out=out)
        check(f"chunk varlen {lens} o ({dtype})", rel(out, ref_o), tol, results)
        check(f"chunk varlen final state ({dtype})", rel(pool[ids.long()], ref_s), tol, results)
        if fla is not None and dtype == torch.float32:
            def fla_err():
                fo, fs = fla.chunk_gated_delta_rule(q[None], k[None], v[None], g[None], beta[None],
                                                    initial_state=init, output_final_state=True,
                                                    use_qk_l2norm_in_kernel=True,
                                                    cu_seqlens=torch.tensor(cu, device="cuda"))
                return rel(fo[0], ref_o), rel(fs, ref_s)
            print(f"  info fla chunk vs naive (o, state): {guarded(fla_err, 'fla chunk check')}")
    return all(results)


def decode_bench(n, dtype, copy_gbs, fla, rows):
    """Ours (in place on a 4-GiB-class pool, rotating slots) and fla (contiguous state) at batch n."""
    q, k, v, a, b, A_log, dt_bias, g, beta = layer_inputs(n, seed=3)
    per_slot = HV * K * K * torch.tensor([], dtype=dtype).element_size()
    num_slots = max(2 * n * GRAPH_CALLS, int(2e9 // per_slot))
    pool = (torch.randn(num_slots, HV, K, K, device="cuda") * 0.3).to(dtype)
    perm = torch.randperm(num_slots, device="cuda")[: n * GRAPH_CALLS].to(torch.int32).view(GRAPH_CALLS, n)
    out = torch.empty(n, HV, K, dtype=torch.bfloat16, device="cuda")
    calls = [lambda ids=ids: ops.fused_recurrent_decode(q, k, v, a, b, A_log, dt_bias, pool, ids, out=out)
             for ids in perm]
    rounds = [graph_us(calls) for _ in range(DECODE_ROUNDS)]
    times = sorted(r[0] for r in rounds)
    us, how = statistics.median(times), rounds[0][1]
    _decode.DECODE_PDL = False  # the same launches without programmatic dependent launch, for comparison
    plain_us = graph_us(calls)[0]
    _decode.DECODE_PDL = True
    nbytes = 2 * n * per_slot + n * (2 * H * K + 2 * HV * K + 4 * HV) * 2
    frac = nbytes / (us * 1e-6) / 1e9 / copy_gbs
    fla_us = float("nan")
    if fla is not None and dtype == torch.float32:
        states = [(torch.randn(n, HV, K, K, device="cuda") * 0.3) for _ in range(GRAPH_CALLS)]
        cu = torch.arange(n + 1, device="cuda")
        fcalls = [lambda s=s: fla.fused_recurrent_gated_delta_rule(
            q[None], k[None], v[None], a.float()[None], beta=b.float()[None], initial_state=s, output_final_state=True,
            use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
            use_beta_sigmoid_in_kernel=True, cu_seqlens=cu) for s in states]
        fla_us = guarded(lambda: graph_us(fcalls)[0], "fla fused_recurrent")
    rows.append(dict(kind="decode", case=f"N={n}", state=str(dtype).split(".")[-1], ours_us=us, fla_us=fla_us,
                     bytes=nbytes, frac_copy_bw=frac, timing=how, plain_us=plain_us, ours_min_us=times[0],
                     ours_max_us=times[-1]))
    print(f"  decode N={n:<3d} {rows[-1]['state']:8s} ours {us:8.1f} us ({how}; {times[0]:.1f}-{times[-1]:.1f} over "
          f"{DECODE_ROUNDS} rounds)  {nbytes / 1e6:7.1f} MB  "
          f"{100 * frac:5.1f}% of copy bw   plain launch {plain_us:8.1f} us   fla {fla_us:8.1f} us")


def prefill_bench(lens, fla, rows):
    """chunk_prefill (f32 state, in place) vs fla chunk_gated_delta_rule (precomputed g, beta), one layer."""
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    q, k, v, a, b, A_log, dt_bias, g, beta = layer_inputs(cu[-1], seed=4)
    num_seqs = len(lens)
    pool = torch.randn(num_seqs, HV, K, K, device="cuda") * 0.3
    ids = torch.arange(num_seqs, dtype=torch.int32, device="cuda")
    tables = ops.prefill_tables(cu, "cuda")
    cu_dev = torch.tensor(cu, device="cuda")
    has_init = torch.ones(num_seqs, dtype=torch.int32, device="cuda")
    ours = median_ms(lambda: ops.chunk_prefill(q, k, v, a, b, A_log, dt_bias, pool, ids, cu_dev,
                                               has_initial_state=has_init, tables=tables))
    fla_ms, err = float("nan"), float("nan")
    if fla is not None:
        init = torch.randn(num_seqs, HV, K, K, device="cuda") * 0.3
        def run_fla():
            return fla.chunk_gated_delta_rule(q[None], k[None], v[None], g[None], beta[None], initial_state=init,
                                              output_final_state=True, use_qk_l2norm_in_kernel=True,
                                              cu_seqlens=cu_dev)
        fla_ms = guarded(lambda: median_ms(run_fla), "fla chunk")
        pool.copy_(init)
        mine = ops.chunk_prefill(q, k, v, a, b, A_log, dt_bias, pool, ids, cu_dev, tables=tables)
        err = guarded(lambda: rel(mine, run_fla()[0][0].float()), "fla chunk output")
    case = f"T={cu[-1] // 1024}K" if num_seqs == 1 else f"{num_seqs}x{lens[0] // 1024}K"
    ws = _launch.chunk_setup(q, k, v, a, b, A_log, dt_bias, pool, tables)
    prep = median_ms(lambda: _launch.chunk_prep(ws, q, k, a, b, A_log, dt_bias, K ** -0.5, tables))
    state = median_ms(lambda: _launch.chunk_state(ws, v, pool, ids, has_init, tables))
    print(f"    {case}: prep kernel {prep:.3f} ms, sequential state kernel {state:.3f} ms")
    rows.append(dict(kind="prefill", case=case, state="float32", ours_us=ours * 1e3, fla_us=fla_ms * 1e3,
                     bytes=float("nan"), frac_copy_bw=float("nan"), timing=f"events; rel vs fla {err:.1e}"))
    print(f"  prefill {case:8s} ours {ours:7.3f} ms   fla {fla_ms:7.3f} ms   ratio fla/ours "
          f"{fla_ms / ours:5.2f}   (o rel diff vs fla {err:.1e})")


def conv_bench(rows):
    """Companion conv kernels on the 27B layer (C = 10240): decode N=32 and prefill T=32K."""
    channels = (2 * H + HV) * K
    weight = torch.randn(channels, 4, device="cuda")
    pool = torch.randn(64, channels, 3, device="cuda").bfloat16()
    ids = torch.arange(32, dtype=torch.int32, device="cuda")
    x = torch.randn(32, channels, device="cuda").bfloat16()
    us, how = graph_us([lambda: ops.conv_decode(x, weight, pool, ids)] * 4)
    rows.append(dict(kind="conv", case="decode N=32", state="bfloat16", ours_us=us, fla_us=float("nan"),
                     bytes=float("nan"), frac_copy_bw=float("nan"), timing=how))
    xt = torch.randn(32768, channels, device="cuda").bfloat16()
    ms = median_ms(lambda: ops.conv_prefill(xt, weight, pool, ids[:1], [0, 32768]))
    rows.append(dict(kind="conv", case="prefill T=32K", state="bfloat16", ours_us=ms * 1e3, fla_us=float("nan"),
                     bytes=2 * xt.numel() * 2, frac_copy_bw=float("nan"), timing="events"))
    print(f"  conv decode N=32 {us:.1f} us; conv prefill T=32K {ms:.3f} ms")
    for tokens in (512, 2048):
        x = xt[:tokens]
        pieces = _launch.conv_pieces(-(-tokens // _launch.CHUNK))
        one, ours = (conv_prefill_us(x, weight, pool, n) for n in (1, pieces))
        rows.append(dict(kind="conv", case=f"prefill T={tokens}", state="bfloat16", ours_us=ours, fla_us=float("nan"),
                         bytes=2 * x.numel() * 2, frac_copy_bw=float("nan"), timing=f"graph; 1 piece {one:.1f} us"))
        print(f"  conv prefill T={tokens} kernel {ours:.1f} us with {pieces} pieces a chunk, {one:.1f} us with 1")


def conv_prefill_us(x, weight, pool, pieces: int) -> float:
    """The gdn_conv_prefill kernel alone (one fresh sequence of x's T tokens, chunk tables built outside), CUDA
    graph timed, with _launch.CONV_PIECES = pieces."""
    cu = torch.tensor([0, x.shape[0]], dtype=torch.int32, device="cuda")
    tables = ops.prefill_tables([0, x.shape[0]], x.device)
    ids, init = torch.zeros(1, dtype=torch.int32, device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda")
    saved, _launch.CONV_PIECES = _launch.CONV_PIECES, pieces
    try:
        return graph_us([lambda: _launch.conv_prefill(x, weight, pool, ids, cu, init, tables)] * 4)[0]
    finally:
        _launch.CONV_PIECES = saved


def load_fla():
    try:
        import fla.ops.gated_delta_rule as fla_gdn
        return fla_gdn
    except Exception as exc:  # noqa: BLE001 - fla is carried as a wheel; report and go on without it
        print(f"fla not importable ({type(exc).__name__}: {exc}); timing ours only")
        return None


def save(rows, copy_gbs):
    out_dir = os.environ.get("OUT")
    if not out_dir:
        return
    # decode rows add plain_us: write_csv's columns are every row's keys
    write_csv(os.path.join(out_dir, "gpu_gdn.csv"), [{"copy_GBps": f"{copy_gbs:.0f}", **r} for r in rows])
    plt = pyplot()
    if plt is None:
        return
    try:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4))
        for ax, kind in zip(axes, ("decode", "prefill")):
            sel = [r for r in rows if r["kind"] == kind]
            labels = [f"{r['case']} {r['state'][:4]}" for r in sel]
            xs = range(len(sel))
            ax.bar([x - 0.2 for x in xs], [r["ours_us"] for r in sel], 0.4, label="ours")
            ax.bar([x + 0.2 for x in xs], [r["fla_us"] for r in sel], 0.4, label="fla 0.6.0")
            ax.set_xticks(list(xs), labels, rotation=45, ha="right")
            ax.set_yscale("log")
            ax.set_ylabel("us (median)")
            ax.set_title(f"GDN {kind}, H200, one 27B layer")
            ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "gpu_gdn.png"), dpi=120)
    except Exception as exc:  # noqa: BLE001 - the plot is optional
        print(f"(plot skipped: {exc})")


def table(rows, copy_gbs, ok):
    print(f"\n== GDN kernels, one 27B layer (H={H}, HV={HV}, K=V={K}); copy bw {copy_gbs:.0f} GB/s; "
          f"correctness {'PASS' if ok else 'FAIL'}")
    print(f"{'kind':8s} {'case':14s} {'state':9s} {'ours us':>10s} {'fla us':>10s} {'fla/ours':>8s} {'%copybw':>8s}")
    for r in rows:
        print(f"{r['kind']:8s} {r['case']:14s} {r['state']:9s} {r['ours_us']:10.1f} {r['fla_us']:10.1f} "
              f"{r['fla_us'] / r['ours_us']:8.2f} {100 * r['frac_copy_bw']:8.1f}")


def main():
    import sys

    if "--decode-variants" in sys.argv:  # kept for the commands in kernels/gdn/NOTES.md
        from bench.gpu_gdn_variants import variants_bench

        variants_bench()
        return
    torch.manual_seed(0)
    fla = load_fla()
    copy_gbs = copy_bandwidth()
    print(f"== device-to-device copy: {copy_gbs:.0f} GB/s (read + write)")
    ok = correctness(fla)
    rows = []
    print("== decode (one token per sequence, state in place by slot id)")
    for dtype in (torch.float32, torch.bfloat16):
        for n in (1, 8, 32, 64):
            decode_bench(n, dtype, copy_gbs, fla, rows)
    print("== chunked prefill (f32 state)")
    for lens in ([4096], [16384], [32768], [2048] * 8):
        prefill_bench(lens, fla, rows)
    conv_bench(rows)
    table(rows, copy_gbs, ok)
    save(rows, copy_gbs)
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
