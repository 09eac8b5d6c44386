"""The decode-step bench's report (bench/gpu_model.py): its table, and with OUT set gpu_model.csv and gpu_model.png
(tokens/s against C for each variant with the roofline drawn in). Not a bench of its own (bench/gpu_all.sh runs
bench/gpu_*.py)."""
import os

from bench.output import write_csv
from bench.plotting import pyplot


def write_outputs(rows: list, out_dir) -> None:
    """rows: sweep()'s dicts (state = variant label, C, roofline_ms, <mode>_ms / _tok_s / _frac); nothing without
    out_dir or rows. The PNG needs matplotlib (skipped without it)."""
    if not out_dir or not rows:
        return
    write_csv(os.path.join(out_dir, "gpu_model.csv"), rows)
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for label in dict.fromkeys(r["state"] for r in rows):
        mine = [r for r in rows if r["state"] == label and "graph_tok_s" in r]
        ax.plot([r["C"] for r in mine], [r["graph_tok_s"] for r in mine], "o-", label=label)
    first = [r for r in rows if r["state"] == rows[0]["state"]]
    ax.plot([r["C"] for r in first], [r["C"] / r["roofline_ms"] * 1e3 for r in first], "k--", label="roofline")
    ax.set(xlabel="concurrent sequences C", ylabel="tokens/s (decode step, CUDA graph)", xscale="log", yscale="log",
           title="27B-shaped decode step")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "gpu_model.png"), dpi=110)


def print_table(rows: list, bandwidth: float, setting: str) -> None:
    """The sweep's rows as a fixed-width table under one line naming the copy bandwidth and `setting`."""
    print(f"\ncopy bandwidth {bandwidth / 1e12:.2f} TB/s (read + write); {setting}")
    print(f"{'variant':>16} {'C':>3} {'GB/step':>8} {'roof ms':>8} {'eager ms':>9} {'tok/s':>8} {'%roof':>6} "
          f"{'graph ms':>9} {'tok/s':>8} {'%roof':>6}")
    for r in rows:
        cells = []
        for mode in ("eager", "graph"):
            if f"{mode}_ms" in r:
                cells.append(f"{r[f'{mode}_ms']:9.2f} {r[f'{mode}_tok_s']:8.0f} {100 * r[f'{mode}_frac']:5.1f}%")
            else:
                cells.append(f"{'-':>9} {'-':>8} {'-':>6}")
        print(f"{r['state']:>16} {r['C']:>3} {r['bytes'] / 1e9:8.2f} {r['roofline_ms']:8.2f} " + " ".join(cells))
