"""Bench: the meta-schema check of a tool's parameters (gateway/structured.py any_draft_schema_error, uncached), as
served, against the order it replaced (the schema's own draft walked for its best error first, then each draft), on
tools of N string properties. Prints ms per check, median of --repeat runs, side by side, and writes
tool_schema_check.csv / .png (bench/output.py's folder).
Run: python -m bench.tool_schema_check [--sizes 100,1000,5000] [--repeat 3]
"""
import argparse
import statistics
import time

from bench.output import output_dir, write_csv
from bench.plotting import pyplot
from gateway import structured


def _old_order(schema: dict):
    """The check before session 30: schema_error (2020-12's best error) first, then each draft's is_valid."""
    error = structured.schema_error(schema)
    if error is None or any(structured._meta_validator(cls).is_valid(schema) for cls in structured._DRAFTS):
        return None
    return error


def _ms(check, schema: dict, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        assert check(schema) is None
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tool_schema_check", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000", help="comma-separated property counts")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| properties | served ms | before ms | ratio |\n| --- | --- | --- | --- |")
    rows = []
    for size in (int(n) for n in args.sizes.split(",")):
        schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(size)}}
        served = _ms(structured._any_draft_schema_error, schema, args.repeat)
        before = _ms(_old_order, schema, args.repeat)
        rows.append({"properties": size, "served_ms": round(served, 2), "before_ms": round(before, 2)})
        print(f"| {size} | {served:.1f} | {before:.1f} | {before / served:.1f}x |", flush=True)
    _write(rows)


def _write(rows: list) -> None:
    """The table as CSV and a log-log PNG of ms against properties, served and before."""
    out = output_dir()
    write_csv(f"{out}/tool_schema_check.csv", rows)
    plt = pyplot("tool_schema_check.png")
    if plt is None:
        return
    sizes = [r["properties"] for r in rows]
    labels = (("served_ms", "served (cheap drafts first)"), ("before_ms", "before (2020-12 best error first)"))
    for key, label in labels:
        plt.loglog(sizes, [r[key] for r in rows], marker="o", label=label)
    plt.xlabel("string properties in the tool's parameters")
    plt.ylabel("ms per meta-schema check")
    plt.legend()
    plt.savefig(f"{out}/tool_schema_check.png", dpi=120)
    print(f"wrote {out}/tool_schema_check.csv and .png")


if __name__ == "__main__":
    main()
