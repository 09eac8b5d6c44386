"""GPU bench (device machine): the paged decode attention kernel (kernels/attention) against the torch decode path
it replaces (worker/layers/paged_attention.decode_attention: gather + two batched matmuls), one 27B attention
layer (24 query heads, 4 kv heads, head dim 256, 16-token blocks in shuffled order), in one run.

`python3 -m bench.gpu_paged_decode`: per batch Nd and context: both times (us per call), the K/V bytes a
step must read (Nd x keys x 4 kv heads x 256 x 2 bytes x 2) and the kernel's fraction of the copy bandwidth
measured in the same run; the split kernel (paged_decode.cu) at 1 and at 2 keys a lane (its KPL), below 8 rows the
few-row kernel (decode_tile.cu), and the tensor-core kernel (decode_mma.cu, the default) at each (warps, stages) of
MMA_CONFIGS, its best time giving the second bandwidth fraction. All timed as CUDA-graph replays (as they
run in the decode step: no host time). With OUT set, writes paged_decode.csv and paged_decode.png there.
"""
import os

import torch

from bench.cuda_timing import copy_bandwidth, graph_us
from bench.plotting import pyplot
from bench.output import write_csv
from kernels.attention import ops
from worker.layers.paged_attention import decode_attention, decode_keys

NUM_HEADS, NUM_KV, HEAD_DIM, BLOCK = 24, 4, 256, 16
CASES = [(1, 256), (1, 512), (1, 1024), (1, 2048), (1, 4096), (1, 32768), (4, 512), (4, 4096), (8, 512), (8, 4096),
         (32, 256), (32, 4096), (64, 256), (64, 4096), (64, 32768)]
MMA_CONFIGS = [(4, 3), (2, 6), (4, 2)]  # decode_mma.cu (warps, stages): the first is ops' default


def bench_case(rows: int, context: int, copy_gbs: float) -> dict:
    need = -(-(context + 1) // BLOCK)
    k_pool = torch.randn(rows * need + 1, BLOCK, NUM_KV, HEAD_DIM, device="cuda").bfloat16()
    v_pool = torch.randn_like(k_pool)
    tables = torch.randperm(rows * need, device="cuda").view(rows, need)
    q = torch.randn(rows, NUM_HEADS, HEAD_DIM, device="cuda").bfloat16()
    keys = torch.full((rows,), context + 1, dtype=torch.int32, device="cuda")
    out = torch.empty_like(q)
    scale = HEAD_DIM ** -0.5
    ours = graph_us([lambda: ops.paged_decode(q, k_pool, v_pool, tables, keys, scale, context + 1, out=out,
                                              keys_per_lane=1, kernel="split")] * 4)[0]
    kpl2 = graph_us([lambda: ops.paged_decode(q, k_pool, v_pool, tables, keys, scale, context + 1, out=out,
                                              keys_per_lane=2, kernel="split")] * 4)[0]
    tile = float("nan")
    if rows < ops.MIN_ROWS:  # the few-row kernel (decode_tile.cu) where it can serve
        tile = graph_us([lambda: ops.paged_decode(q, k_pool, v_pool, tables, keys, scale, context + 1, out=out,
                                                  kernel="tile")] * 4)[0]
    mma = [graph_us([lambda c=c: ops.paged_decode(q, k_pool, v_pool, tables, keys, scale, context + 1, out=out,
                                                  kernel="mma", mma_config=c)] * 4)[0] for c in MMA_CONFIGS]
    index, valid = decode_keys(tables, list(range(rows)), [context] * rows, BLOCK, q.device)
    flat_k, flat_v = (p.view(-1, NUM_KV, HEAD_DIM) for p in (k_pool, v_pool))
    try:
        torch_us = graph_us([lambda: decode_attention(q, flat_k, flat_v, index, valid, scale)] * 2)[0]
    except torch.OutOfMemoryError:
        torch_us = float("nan")
    nbytes = rows * (context + 1) * NUM_KV * HEAD_DIM * 2 * 2
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    row = {"rows": rows, "context": context, "splits": ops.num_splits(rows, NUM_KV, context + 1, sms),
           "ours_us": ours, "kpl2_us": kpl2, "tile_us": tile, "torch_us": torch_us, "bytes": nbytes,
           "frac_copy_bw": nbytes / (ours * 1e-6) / 1e9 / copy_gbs}
    row.update({f"mma{w}x{st}_us": t for (w, st), t in zip(MMA_CONFIGS, mma)})
    row["mma_frac_copy_bw"] = nbytes / (min(mma) * 1e-6) / 1e9 / copy_gbs
    print(f"  Nd={rows:<3d} ctx={context:<6d} S={row['splits']:<3d} split {ours:8.1f} us  (2 keys a lane "
          f"{kpl2:8.1f}, few-row {tile:7.1f})  mma {' / '.join(f'{t:8.1f}' for t in mma)}  torch {torch_us:8.1f} us"
          f"  {nbytes / 1e6:8.1f} MB  split {100 * row['frac_copy_bw']:5.1f}% / best mma "
          f"{100 * row['mma_frac_copy_bw']:5.1f}% of copy bw", flush=True)
    return row


def save(rows: list) -> None:
    out_dir = os.environ.get("OUT")
    if not out_dir or not rows:
        return
    write_csv(os.path.join(out_dir, "paged_decode.csv"), rows)
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [f"{r['rows']}x{r['context']}" for r in rows]
    ax.bar([i - 0.2 for i in range(len(rows))], [r["frac_copy_bw"] for r in rows], 0.4, label="split kernel")
    ax.bar([i + 0.2 for i in range(len(rows))], [r["mma_frac_copy_bw"] for r in rows], 0.4, label="mma kernel")
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="copy bandwidth")
    ax.set(xticks=range(len(rows)), ylabel="fraction of copy bandwidth", title="paged decode attention, 27B layer")
    ax.set_xticklabels(labels, rotation=45, fontsize=7)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "paged_decode.png"), dpi=110)


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    copy_gbs = copy_bandwidth()
    print(f"== paged decode attention (24 q heads, 4 kv heads, hd 256); copy bw {copy_gbs:.0f} GB/s; mma configs "
          f"(warps, stages) {MMA_CONFIGS}")
    rows = []
    for num_rows, context in CASES:
        rows.append(bench_case(num_rows, context, copy_gbs))
        torch.cuda.empty_cache()
    save(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
