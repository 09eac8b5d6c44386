"""Bench helper (the process of bench/serve_http.py): per-request serving metrics as vLLM's benchmark_serving.py
defines them, the decode roofline, and the table and PNG (the CSV: bench/output.py).

TTFT: send -> first streamed chunk with text. ITL: the gaps between a request's successive text chunks, pooled over
all requests. TPOT: (E2E - TTFT) / (output tokens - 1) per request. E2E: send -> end of the stream. Output tok/s:
all output tokens (usage.completion_tokens) / wall time of the level, first send to last end; request/s likewise.
Percentiles interpolate linearly (numpy's default, as vLLM). Roofline: the bytes one decode step of C sequences must
move (bench/gpu_model.step_bytes: every Linear weight once, each sequence's GDN recurrent and conv state read and
written, its KV read at the level's mean context) over the copy bandwidth: C / (bytes / bandwidth) tokens/s.
"""
import os
from dataclasses import dataclass, field

import numpy as np

from bench.gpu_model import step_bytes
from bench.plotting import pyplot

COLUMNS = (("C", "C", "{:d}"), ("requests", "requests", "{:d}"), ("failed", "failed", "{:d}"),
           ("output_tok_s", "out tok/s", "{:.1f}"), ("req_s", "req/s", "{:.2f}"),
           ("ttft_median_ms", "TTFT med ms", "{:.1f}"), ("ttft_p99_ms", "TTFT p99 ms", "{:.1f}"),
           ("itl_median_ms", "ITL med ms", "{:.2f}"), ("itl_p99_ms", "ITL p99 ms", "{:.2f}"),
           ("tpot_median_ms", "TPOT med ms", "{:.2f}"), ("e2e_median_ms", "E2E med ms", "{:.0f}"),
           ("step_gb", "GB/step", "{:.3f}"), ("roofline_tok_s", "roof tok/s", "{:.0f}"),
           ("roofline_frac", "% roof", "{:.1%}"))


@dataclass
class RequestResult:
    """One streamed request; times are time.perf_counter() seconds."""
    ok: bool
    start: float
    end: float
    chunk_times: list = field(default_factory=list)  # arrival of each chunk that carried text
    output_tokens: int = 0  # usage.completion_tokens
    error: str = ""

    @property
    def ttft(self) -> float:
        return self.chunk_times[0] - self.start

    @property
    def itls(self) -> list:
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]

    @property
    def e2e(self) -> float:
        return self.end - self.start


def _ms(values: list, q: float) -> float:
    return float(np.percentile(values, q)) * 1e3 if values else float("nan")


def summarize(concurrency: int, results: list, wall_s: float) -> dict:
    """One level's row: counts, throughput and latency percentiles (ms) of the successful requests."""
    done = [r for r in results if r.ok and r.chunk_times]
    ttfts, e2es = [r.ttft for r in done], [r.e2e for r in done]
    itls = [gap for r in done for gap in r.itls]
    tpots = [(r.e2e - r.ttft) / (r.output_tokens - 1) for r in done if r.output_tokens > 1]
    num_tokens = sum(r.output_tokens for r in done)
    return {"C": concurrency, "requests": len(done), "failed": len(results) - len(done), "wall_s": wall_s,
            "output_tokens": num_tokens, "output_tok_s": num_tokens / wall_s, "req_s": len(done) / wall_s,
            "ttft_median_ms": _ms(ttfts, 50), "ttft_p99_ms": _ms(ttfts, 99), "itl_median_ms": _ms(itls, 50),
            "itl_p99_ms": _ms(itls, 99), "tpot_median_ms": _ms(tpots, 50), "e2e_median_ms": _ms(e2es, 50)}


def add_roofline(row: dict, config, weight_bytes: int, state_size: int, context: int, bandwidth) -> dict:
    """Adds step_gb (bytes of one decode step of C sequences at `context`), and with a bandwidth (bytes/s, or None)
    roofline_tok_s and roofline_frac (the measured output tok/s over it)."""
    step = sum(step_bytes(config, weight_bytes, row["C"], state_size, context).values())
    row["step_gb"] = step / 1e9
    row["roofline_tok_s"] = row["C"] / (step / bandwidth) if bandwidth else float("nan")
    row["roofline_frac"] = row["output_tok_s"] / row["roofline_tok_s"] if bandwidth else float("nan")
    return row


def format_table(rows: list) -> str:
    """A Markdown table of COLUMNS, one line per level ('-' for values not measured)."""
    lines = ["| " + " | ".join(title for _, title, _ in COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for row in rows:
        cells = ["-" if row[key] != row[key] else fmt.format(row[key]) for key, _, fmt in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_png(path: str, rows: list, title: str) -> bool:
    """Output tok/s against C with the roofline; False (and a note) when matplotlib is not installed."""
    plt = pyplot(os.path.basename(path))
    if plt is None:
        return False

    cs = [r["C"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(cs, [r["output_tok_s"] for r in rows], marker="o", label="served output tokens/s")
    if any(r["roofline_tok_s"] == r["roofline_tok_s"] for r in rows):
        ax.plot(cs, [r["roofline_tok_s"] for r in rows], linestyle="--", marker="x", label="decode roofline")
    ax.set(xscale="log", xlabel="concurrent requests C", ylabel="output tokens / s")
    ax.set_ylim(bottom=0)
    ax.minorticks_off()
    ax.set_xticks(cs, [str(c) for c in cs])
    ax.set_title(title, fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
