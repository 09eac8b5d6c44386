"""The benches' one CSV writer and output folder: a bench process's table as CSV beside its PNG (bench/plotting.py)."""
import csv
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_csv(path: str, rows: list) -> None:
    """rows (dicts) as CSV (the csv module's dialect: comma, CRLF, quoted where needed); the columns are every key any
    row has, in first-seen order (empty where a row lacks one). No rows: an empty header line."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)


def output_dir() -> str:
    """The folder a CPU bench writes to: $OUT, else bench/out; created if missing."""
    path = os.environ.get("OUT") or os.path.join(REPO, "bench", "out")
    os.makedirs(path, exist_ok=True)
    return path
